/* Launch configurations of the tiled (FlashAttention-2) attention kernels of
 * exec/kernels_cuda_flash.cu, in plain C so that every machine builds and tests them
 * (tests/test_flash_launch.c): tile sizes, shared memory bytes and grids for a shape and a GPU's
 * compute capability, the head-dimension limit and the grouped-query head mapping.
 *
 * The kernels follow Dao 2023 ("FlashAttention-2", Alg. 1 forward, Alg. 2 backward): a block keeps a
 * tile of `br` query rows in shared memory and walks the key/value tiles of `bc` rows with an online
 * softmax, never writing the Tq × Tk scores; products run on tensor cores (WMMA 16×16×16 bf16
 * fragments, fp32 accumulation, sm_80 and later). Each warp owns 16 rows of the block's tile, so
 * a tile of r rows runs r / 16 warps. The backward is deterministic: one kernel per key tile and kv
 * head sums dK, dV over the group's query heads and every query tile in a fixed order, another
 * per query tile computes dQ over the key tiles, so no atomics.
 *
 * Shared memory per block (bf16 = 2 bytes, fp32 = 4; dp = D rounded up to 16, the WMMA depth):
 *   forward:  Q, K, V tiles (br + 2 bc) dp bf16; scores br bc fp32 and P br bc bf16; the output
 *             accumulator br dp fp32; row max and sum 2 br fp32.
 *   dK, dV:   K, V (bc dp) and Q, dO (br dp) bf16; dK, dV accumulators 2 bc dp fp32; S^T and
 *             dP^T 2 bc br fp32, P^T and dS^T 2 bc br bf16; lse and D_i 2 br fp32.
 *   dQ:       Q, dO (br dp) and K, V (bc dp) bf16; dQ accumulator br dp fp32; S and dP 2 br bc
 *             fp32; dS br bc bf16; lse and D_i 2 br fp32.
 * The largest tiles of TS_FLASH_TILES that fit the GPU's per-block opt-in limit (with
 * TS_FLASH_STATIC_SMEM) are taken (bigger
 * tiles read K and V fewer times). Limits from the CUDA C++ Programming Guide, "Technical
 * Specifications per Compute Capability" (maximum shared memory per thread block): 163 KB on 8.0
 * and 8.7, 99 KB on 8.6 and 8.9, 227 KB on 9.0. */
#ifndef TS_FLASH_LAUNCH_H
#define TS_FLASH_LAUNCH_H

#include <stddef.h>

#include "common/host_device.h"
#include "common/status.h"

#define TS_FLASH_MAX_D 256 /* head dims above are refused (FlashAttention-2 supports up to 256) */
#define TS_FLASH_WMMA 16   /* WMMA bf16 fragment: 16 × 16 × 16 */
#define TS_FLASH_MAX_GRID_YZ 65535u
#define TS_FLASH_STATIC_SMEM 64 /* bytes of static shared memory the kernels add (a reduction slot) */

typedef enum { TS_FLASH_FWD = 0, TS_FLASH_BWD_DKDV, TS_FLASH_BWD_DQ } ts_flash_kernel;

typedef struct {
    int br, bc;        /* query rows and key rows per tile (multiples of 16) */
    int dp;            /* head dim rounded up to 16 (zero padding in shared memory) */
    int warps;         /* 32-thread warps per block: (rows the block owns) / 16 */
    size_t smem_bytes; /* dynamic shared memory per block */
    unsigned grid_x;   /* tiles: query tiles (forward, dQ) or key tiles (dK, dV) */
    unsigned grid_y;   /* heads: query heads (forward, dQ) or kv heads (dK, dV) */
    unsigned grid_z;   /* sequences of the batch */
} ts_flash_cfg;

/* Bytes of dynamic shared memory one block may opt into on compute capability major.minor; 0 for
 * GPUs before 8.0 (no bf16 WMMA: the tiled kernels refuse them). */
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

/* The shared memory bytes `kernel` needs with tiles br × bc at padded head dim dp (the formulas
 * above; the kernels carve their buffers in this order). */
size_t ts_flash_smem_bytes(ts_flash_kernel kernel, int br, int bc, int dp);

/* Grouped-query attention: query head h of H reads kv head h / (H / KV) (Ainslie et al. 2023). */
static inline TS_HOST_DEVICE int ts_flash_kv_head(int h, int H, int KV) { return h / (H / KV); }

#endif
