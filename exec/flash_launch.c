/* Tile choice and grids of the tiled attention kernels (see flash_launch.h). */
#include "exec/flash_launch.h"

/* Candidate (br, bc) tiles, largest first; the first that fits the GPU's shared memory wins.
 * FlashAttention-2 uses 128 × 64 or 64 × 64 forward tiles at head dims up to 128 and smaller ones at
 * 256 (Dao 2023, Sec. 3.3 and the tile tables of flash-attention's csrc/flash_attn kernel traits). */
static const int TS_FLASH_TILES[][2] = {{128, 64}, {64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}};
#define N_TILES ((int)(sizeof TS_FLASH_TILES / sizeof TS_FLASH_TILES[0]))

size_t ts_flash_smem_limit(int cc_major, int cc_minor) {
    if (cc_major < 8) return 0;
    if (cc_major == 8) return (cc_minor == 6 || cc_minor == 9) ? 99u * 1024 : 163u * 1024;
    return 227u * 1024; /* 9.0 and later */
}

size_t ts_flash_smem_bytes(ts_flash_kernel kernel, int br, int bc, int dp) {
    size_t b = (size_t)br, c = (size_t)bc, d = (size_t)dp, bf = 2, f = 4;
    switch (kernel) {
    case TS_FLASH_FWD:
        return (b + 2 * c) * d * bf + b * c * (f + bf) + b * d * f + 2 * b * f;
    case TS_FLASH_BWD_DKDV:
        return (2 * c + 2 * b) * d * bf + 2 * c * d * f + 2 * c * b * (f + bf) + 2 * b * f;
    case TS_FLASH_BWD_DQ:
        return (2 * b + 2 * c) * d * bf + b * d * f + 2 * b * c * f + b * c * bf + 2 * b * f;
    }
    return 0;
}

static ts_status check_shape(int Tq, int Tk, int H, int KV, int D, int batch) {
    if (D < 1 || D > TS_FLASH_MAX_D)
        return TS_FAIL(TS_ERR_INPUT, "flash attention: head dim %d, expected 1 to %d", D, TS_FLASH_MAX_D);
    if (KV < 1 || H < KV || H % KV != 0)
        return TS_FAIL(TS_ERR_INPUT, "flash attention: %d query heads over %d kv heads, expected a positive multiple",
                       H, KV);
    if (Tq < 0 || Tk < 0) return TS_FAIL(TS_ERR_INPUT, "flash attention: Tq=%d Tk=%d, expected both >= 0", Tq, Tk);
    if (batch < 1) return TS_FAIL(TS_ERR_INPUT, "flash attention: batch %d, expected >= 1", batch);
    return TS_OK;
}

ts_status ts_flash_check_strides(int ldq, int ldk, int ldv, int ldo, int H, int KV, int D) {
    if (ldq < H * D || ldo < H * D || ldk < KV * D || ldv < KV * D)
        return TS_FAIL(TS_ERR_INPUT, "flash attention: row strides ldq=%d ldo=%d ldk=%d ldv=%d below H*D=%d / KV*D=%d",
                       ldq, ldo, ldk, ldv, H * D, KV * D);
    return TS_OK;
}

ts_status ts_flash_config(ts_flash_kernel kernel, int Tq, int Tk, int H, int KV, int D, int batch, int cc_major,
                          int cc_minor, ts_flash_cfg *out) {
    TS_CHECK(check_shape(Tq, Tk, H, KV, D, batch));
    size_t limit = ts_flash_smem_limit(cc_major, cc_minor);
    if (limit == 0)
        return TS_FAIL(TS_ERR_INPUT, "flash attention: compute capability %d.%d has no bf16 tensor cores (needs 8.0+)",
                       cc_major, cc_minor);
    int dp = (D + TS_FLASH_WMMA - 1) / TS_FLASH_WMMA * TS_FLASH_WMMA;
    int t = 0;
    while (t < N_TILES && ts_flash_smem_bytes(kernel, TS_FLASH_TILES[t][0], TS_FLASH_TILES[t][1], dp) + TS_FLASH_STATIC_SMEM > limit)
        t++;
    if (t == N_TILES) /* cannot happen for D <= 256 (16 × 16 tiles need ~40 KB), kept for the contract */
        return TS_FAIL(TS_ERR_INPUT, "flash attention: head dim %d needs more shared memory than %zu bytes", D, limit);
    ts_flash_cfg c = {.br = TS_FLASH_TILES[t][0], .bc = TS_FLASH_TILES[t][1], .dp = dp};
    c.smem_bytes = ts_flash_smem_bytes(kernel, c.br, c.bc, dp);
    int by_keys = kernel == TS_FLASH_BWD_DKDV;
    int rows = by_keys ? Tk : Tq, tile = by_keys ? c.bc : c.br;
    c.warps = tile / TS_FLASH_WMMA;
    c.grid_x = (Tq == 0 || Tk == 0) ? 0u : (unsigned)((rows + tile - 1) / tile);
    c.grid_y = (unsigned)(by_keys ? KV : H);
    c.grid_z = (unsigned)batch;
    if (c.grid_y > TS_FLASH_MAX_GRID_YZ || c.grid_z > TS_FLASH_MAX_GRID_YZ)
        return TS_FAIL(TS_ERR_INPUT, "flash attention: grid y=%u (heads) z=%u (batch) past CUDA's %u", c.grid_y,
                       c.grid_z, TS_FLASH_MAX_GRID_YZ);
    *out = c;
    return TS_OK;
}
