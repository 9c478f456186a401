/* Launch configurations of the tiled (FlashAttention-2) attention kernels of
 * exec/kernels_cuda_flash.cu, in plain C so that every machine builds and tests them
 * (tests/test_flash_launch.c): tile sizes, shared memory bytes and grids for a shape and a GPU's
 * compute capability, the head-dimension limit and the grouped-query head mapping.
 *
 * The kernels follow Dao 2023 ("FlashAttention-2", Alg. 1 forward, Alg. 2 backward) as its
 * implementation does on Ampere and Hopper without Hopper-only instructions: each warp owns 16 rows
 * of its block's tile and keeps their scores, probabilities and accumulators in registers, as the
 * fragments of the tensor cores' mma.sync.m16n8k16 bf16 instruction (fp32 accumulation; PTX ISA,
 * "Matrix Fragments for mma.m16n8k16"); the block's warps share the other side's tiles in shared
 * memory. Probabilities go from the scores' accumulator fragments straight into the next product's
 * operand fragments (FlashAttention-2 Sec. 3.1: no round trip through shared memory). The
 * backward is deterministic: one kernel per key tile and kv head sums dK, dV over the group's query
 * heads and every query tile in a fixed order, another per query tile computes dQ over the key
 * tiles, so no atomics.
 *
 * The head dim is padded with zeros to the kernels' compiled widths (TS_FLASH_WIDTHS: the register
 * arrays are sized at compile time). Tiles: the block owns 16·warps rows (query rows forward and
 * for dQ, key rows for dK and dV) and walks the other side `TS_FLASH_FWD_KEYS(dp)` keys (forward)
 * or TS_FLASH_BWD_TILE rows (backward) at a time. Shared memory per block, bf16 (2 bytes), each
 * row padded by TS_FLASH_PAD elements so that the 8 row groups of a fragment load fall on distinct
 * banks:
 *   forward:  Q (br rows), K (bc rows) row-major and V transposed (dp rows of bc keys), and the
 *             key tile's positions (bc ints);
 *   dK, dV:   K, V (bc rows), Q and dO (br rows) row-major and transposed, and the query tile's
 *             lse, D_i and positions (3 br × 4 bytes);
 *   dQ:       Q, dO (br rows), K, V (bc rows) row-major, K transposed, the key positions (bc ints).
 * The most warps of TS_FLASH_MAX_WARPS, halving, whose tiles fit the GPU's per-block opt-in limit
 * (with TS_FLASH_STATIC_SMEM) are taken. Limits from the CUDA C++ Programming Guide, "Technical
 * Specifications per Compute Capability" (maximum shared memory per thread block): 163 KB on 8.0
 * and 8.7, 99 KB on 8.6 and 8.9, 227 KB on 9.0. */
#ifndef TS_FLASH_LAUNCH_H
#define TS_FLASH_LAUNCH_H

#include <stddef.h>

#include "common/host_device.h"
#include "common/status.h"

#define TS_FLASH_MAX_D 256 /* head dims above are refused (FlashAttention-2 supports up to 256) */
#define TS_FLASH_MMA_ROWS 16 /* rows of one mma.m16n8k16 fragment: a warp's rows */
#define TS_FLASH_PAD 8       /* bf16 elements padding each shared-memory row (16 bytes) */
#define TS_FLASH_MAX_WARPS 8 /* per block: 128 rows, FlashAttention-2's kBlockM at head dims up to 128 */
#define TS_FLASH_BWD_TILE 32 /* rows of the other side per step of the backward kernels */
/* Keys per forward step at padded head dim dp: 64 (FlashAttention-2's kBlockN up to 128), 32 above
 * (the probabilities' registers beside a wider output accumulator). */
#define TS_FLASH_FWD_KEYS(dp) ((dp) <= 128 ? 64 : 32)
#define TS_FLASH_MAX_GRID_YZ 65535u
#define TS_FLASH_STATIC_SMEM 64 /* bytes of static shared memory the kernels add (a reduction slot) */

typedef enum { TS_FLASH_FWD = 0, TS_FLASH_BWD_DKDV, TS_FLASH_BWD_DQ } ts_flash_kernel;

typedef struct {
    int br, bc;        /* query rows and key rows per tile (multiples of 16) */
    int dp;            /* head dim padded to a compiled width (TS_FLASH_WIDTHS; zeros in shared memory) */
    int warps;         /* 32-thread warps per block: (rows the block owns) / 16 */
    size_t smem_bytes; /* dynamic shared memory per block */
    unsigned grid_x;   /* tiles: query tiles (forward, dQ) or key tiles (dK, dV) */
    unsigned grid_y;   /* heads: query heads (forward, dQ) or kv heads (dK, dV) */
    unsigned grid_z;   /* sequences of the batch */
} ts_flash_cfg;

/* The head-dim widths the kernels are compiled for; a head dim D runs at the first >= D. */
extern const int TS_FLASH_WIDTHS[];
#define TS_FLASH_N_WIDTHS 7

/* Bytes of dynamic shared memory one block may opt into on compute capability major.minor; 0 for
 * GPUs before 8.0 (no bf16 mma.sync: the tiled kernels refuse them). */
size_t ts_flash_smem_limit(int cc_major, int cc_minor);

/* The launch of `kernel` for Tq query and Tk key rows per sequence, H query heads over KV kv heads
 * of dim D, `batch` sequences, on a GPU of capability major.minor. TS_ERR_INPUT (one line naming
 * the value) for D outside 1..TS_FLASH_MAX_D, H not a positive multiple of KV, negative rows, a
 * batch < 1, grids past CUDA's limits, or a GPU without bf16 tensor cores. Empty work (Tq or Tk
 * 0) gives grid_x 0: the caller launches nothing. */
ts_status ts_flash_config(ts_flash_kernel kernel, int Tq, int Tk, int H, int KV, int D, int batch, int cc_major,
                          int cc_minor, ts_flash_cfg *out);

/* Row strides (floats) of q (ldq), k (ldk), v (ldv) and out / dout (ldo): TS_ERR_INPUT naming them
 * when below the rows they hold (H·D for q and out, KV·D for k and v). */
ts_status ts_flash_check_strides(int ldq, int ldk, int ldv, int ldo, int H, int KV, int D);

/* The shared memory bytes `kernel` needs with tiles br × bc at padded head dim dp (the layouts
 * above; the kernels carve their buffers in this order). */
size_t ts_flash_smem_bytes(ts_flash_kernel kernel, int br, int bc, int dp);

/* Grouped-query attention: query head h of H reads kv head h / (H / KV) (Ainslie et al. 2023). */
static inline TS_HOST_DEVICE int ts_flash_kv_head(int h, int H, int KV) { return h / (H / KV); }

/* The tile loaders' i-th group of 4 columns (row *r, first column *c) of a tile `dp` wide: in row
 * order (consecutive i, consecutive columns of a row), or by warp (by_warp: 32 consecutive i cover
 * 8 rows × 4 groups, i % 8 the row, so that transposed stores of a warp fall on distinct banks;
 * blocks of 8 rows × 16 columns, column blocks inner). Both visit each of rows × dp / 4 groups
 * once for i < rows · dp / 4 when rows is a multiple of 8 and dp of 16. */
static inline TS_HOST_DEVICE void ts_flash_tile_group(int i, int dp, int by_warp, int *r, int *c) {
    if (!by_warp) {
        *r = i / (dp / 4), *c = i % (dp / 4) * 4;
        return;
    }
    int lane = i % 32, blk = i / 32;
    *r = blk / (dp / 16) * 8 + lane % 8;
    *c = (blk % (dp / 16) * 4 + lane / 8) * 4;
}

#endif
