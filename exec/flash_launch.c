/* Tile choice and grids of the tiled attention kernels (see flash_launch.h). */
#include "exec/flash_launch.h"

const int TS_FLASH_WIDTHS[TS_FLASH_N_WIDTHS] = {16, 32, 64, 96, 128, 192, 256};

size_t ts_flash_smem_limit(int cc_major, int cc_minor) {
    if (cc_major < 8) return 0;
    if (cc_major == 8) return (cc_minor == 6 || cc_minor == 9) ? 99u * 1024 : 163u * 1024;
    return 227u * 1024; /* 9.0 and later */
}

size_t ts_flash_smem_bytes(ts_flash_kernel kernel, int br, int bc, int dp) {
    size_t b = (size_t)br, c = (size_t)bc, d = (size_t)dp, row = d + TS_FLASH_PAD, bf = 2, i4 = 4;
    switch (kernel) {
    case TS_FLASH_FWD: /* Q, K row-major, V transposed, key positions */
        return ((b + c) * row + d * (c + TS_FLASH_PAD)) * bf + c * i4;
    case TS_FLASH_BWD_DKDV: /* K, V; Q, dO both ways; lse, D_i, query positions */
        return (2 * c * row + 2 * b * row + 2 * d * (b + TS_FLASH_PAD)) * bf + 3 * b * i4;
    case TS_FLASH_BWD_DQ: /* Q, dO; K, V; K transposed; key positions */
        return (2 * b * row + 2 * c * row + d * (c + TS_FLASH_PAD)) * bf + c * i4;
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
    int dp = 0;
    for (int w = 0; w < TS_FLASH_N_WIDTHS && dp == 0; w++)
        if (TS_FLASH_WIDTHS[w] >= D) dp = TS_FLASH_WIDTHS[w];
    int by_keys = kernel == TS_FLASH_BWD_DKDV;
    int other = kernel == TS_FLASH_FWD ? TS_FLASH_FWD_KEYS(dp) : TS_FLASH_BWD_TILE; /* rows walked per step */
    ts_flash_cfg c = {.dp = dp};
    for (c.warps = TS_FLASH_MAX_WARPS; c.warps >= 1; c.warps /= 2) {
        int own = c.warps * TS_FLASH_MMA_ROWS;
        c.br = by_keys ? other : own;
        c.bc = by_keys ? own : other;
        c.smem_bytes = ts_flash_smem_bytes(kernel, c.br, c.bc, dp);
        if (c.smem_bytes + TS_FLASH_STATIC_SMEM <= limit) break;
    }
    if (c.warps < 1) /* cannot happen for D <= 256 on 8.0+ (one warp needs at most about 90 KB), kept for the contract */
        return TS_FAIL(TS_ERR_INPUT, "flash attention: head dim %d needs more shared memory than %zu bytes", D, limit);
    int rows = by_keys ? Tk : Tq, tile = by_keys ? c.bc : c.br;
    c.grid_x = (Tq == 0 || Tk == 0) ? 0u : (unsigned)((rows + tile - 1) / tile);
    c.grid_y = (unsigned)(by_keys ? KV : H);
    c.grid_z = (unsigned)batch;
    if (c.grid_y > TS_FLASH_MAX_GRID_YZ || c.grid_z > TS_FLASH_MAX_GRID_YZ)
        return TS_FAIL(TS_ERR_INPUT, "flash attention: grid y=%u (heads) z=%u (batch) past CUDA's %u", c.grid_y,
                       c.grid_z, TS_FLASH_MAX_GRID_YZ);
    *out = c;
    return TS_OK;
}
