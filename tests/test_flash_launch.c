/* Launch configurations of the tiled attention kernels (exec/flash_launch.h), suite `flash_launch`
 * (no GPU needed): head dims past 256 and GPUs without bf16 tensor cores refused, shared memory
 * within each GPU's per-block limit for every head dim, grids that cover every query (or key) row
 * with whole warps per tile, and the grouped-query head mapping. */
#include <criterion/criterion.h>
#include <string.h>

#include "exec/flash_launch.h"

static const ts_flash_kernel KINDS[] = {TS_FLASH_FWD, TS_FLASH_BWD_DKDV, TS_FLASH_BWD_DQ};
static const int CCS[][2] = {{8, 0}, {8, 6}, {8, 9}, {9, 0}};

Test(flash_launch, head_dim_limits) {
    ts_flash_cfg c;
    for (int k = 0; k < 3; k++) {
        cr_expect_eq(ts_flash_config(KINDS[k], 128, 128, 8, 8, 256, 1, 8, 0, &c), TS_OK, "%s", ts_error_message());
        ts_error_clear();
        cr_expect_eq(ts_flash_config(KINDS[k], 128, 128, 8, 8, 257, 1, 9, 0, &c), TS_ERR_INPUT);
        cr_expect(strstr(ts_error_message(), "head dim 257") != NULL, "%s", ts_error_message());
        cr_expect_eq(ts_flash_config(KINDS[k], 128, 128, 8, 8, 0, 1, 9, 0, &c), TS_ERR_INPUT);
    }
}

Test(flash_launch, refuses_bad_shapes_and_old_gpus) {
    ts_flash_cfg c;
    cr_expect_eq(ts_flash_config(TS_FLASH_FWD, 64, 64, 12, 8, 64, 1, 9, 0, &c), TS_ERR_INPUT, "H not a multiple of KV");
    cr_expect_eq(ts_flash_config(TS_FLASH_FWD, 64, 64, 4, 8, 64, 1, 9, 0, &c), TS_ERR_INPUT, "KV > H");
    cr_expect_eq(ts_flash_config(TS_FLASH_FWD, -1, 64, 8, 8, 64, 1, 9, 0, &c), TS_ERR_INPUT);
    cr_expect_eq(ts_flash_config(TS_FLASH_FWD, 64, 64, 8, 8, 64, 0, 9, 0, &c), TS_ERR_INPUT);
    cr_expect_eq(ts_flash_config(TS_FLASH_FWD, 64, 64, 8, 8, 64, 70000, 9, 0, &c), TS_ERR_INPUT, "grid z > 65535");
    ts_error_clear();
    cr_expect_eq(ts_flash_config(TS_FLASH_FWD, 64, 64, 8, 8, 64, 1, 7, 5, &c), TS_ERR_INPUT, "sm_75: no bf16 mma.sync");
    cr_expect(strstr(ts_error_message(), "7.5") != NULL, "%s", ts_error_message());
    cr_expect_eq(ts_flash_smem_limit(7, 0), 0u);
}

/* Published per-block limits (CUDA C++ Programming Guide, compute capabilities table). */
Test(flash_launch, smem_limits_by_capability) {
    cr_expect_eq(ts_flash_smem_limit(8, 0), 166912u);
    cr_expect_eq(ts_flash_smem_limit(8, 6), 101376u);
    cr_expect_eq(ts_flash_smem_limit(8, 9), 101376u);
    cr_expect_eq(ts_flash_smem_limit(9, 0), 232448u);
}

/* Every head dim, kernel and GPU: the tiles fit, are whole 16-row fragments, the head dim runs at
 * the first compiled width that holds it, and the bytes are the formula's; a GPU with more shared
 * memory never takes smaller tiles. */
Test(flash_launch, every_head_dim_fits_shared_memory) {
    for (int D = 1; D <= TS_FLASH_MAX_D; D++)
        for (int k = 0; k < 3; k++) {
            int prev_area = 0;
            for (int g = 0; g < 4; g++) {
                ts_flash_cfg c;
                cr_assert_eq(ts_flash_config(KINDS[k], 100, 100, 4, 2, D, 1, CCS[g][0], CCS[g][1], &c), TS_OK, "%s",
                             ts_error_message());
                size_t limit = ts_flash_smem_limit(CCS[g][0], CCS[g][1]);
                cr_assert(c.smem_bytes + TS_FLASH_STATIC_SMEM <= limit, "D=%d kind %d cc %d.%d: %zu bytes > %zu", D,
                          k, CCS[g][0], CCS[g][1], c.smem_bytes, limit);
                cr_assert_eq(c.smem_bytes, ts_flash_smem_bytes(KINDS[k], c.br, c.bc, c.dp));
                cr_assert(c.br % 16 == 0 && c.bc % 16 == 0 && c.br > 0 && c.bc > 0);
                int w = 0;
                while (TS_FLASH_WIDTHS[w] < D) w++;
                cr_assert_eq(c.dp, TS_FLASH_WIDTHS[w], "D=%d dp=%d", D, c.dp);
                if (g != 1 && g != 2) { /* 8.0 then 9.0: more memory, tiles at least as large */
                    cr_assert(c.br * c.bc >= prev_area, "D=%d kind %d: smaller tiles on a bigger GPU", D, k);
                    prev_area = c.br * c.bc;
                }
            }
        }
}

/* FlashAttention-2's forward block at head dim 128: 128 query rows (8 warps of 16), 64 keys a step,
 * on an A100 and an H100 alike (both fit: 71 KB); the backward walks 32 rows a step. At head dim
 * 256 an RTX 4090's 99 KB hold one warp of keys for dK, dV and two of queries for dQ; an H100's
 * 227 KB hold eight. */
Test(flash_launch, tiles_at_head_dims_128_and_256) {
    ts_flash_cfg a, h, kv, q;
    cr_assert_eq(ts_flash_config(TS_FLASH_FWD, 4096, 4096, 32, 8, 128, 2, 8, 0, &a), TS_OK);
    cr_assert_eq(ts_flash_config(TS_FLASH_FWD, 4096, 4096, 32, 8, 128, 2, 9, 0, &h), TS_OK);
    cr_expect(a.br == 128 && a.bc == 64 && a.warps == 8, "A100: %d x %d, %d warps", a.br, a.bc, a.warps);
    cr_expect(h.br == 128 && h.bc == 64 && h.warps == 8, "H100: %d x %d, %d warps", h.br, h.bc, h.warps);
    cr_expect_eq(h.smem_bytes, (size_t)((128 + 64) * 136 + 128 * 72) * 2 + 64 * 4);
    cr_expect_eq(h.grid_x, 32u);
    cr_assert_eq(ts_flash_config(TS_FLASH_BWD_DKDV, 4096, 4096, 32, 8, 128, 2, 9, 0, &kv), TS_OK);
    cr_expect(kv.br == TS_FLASH_BWD_TILE && kv.bc == 128 && kv.grid_y == 8u, "dK, dV: %d x %d", kv.br, kv.bc);
    cr_assert_eq(ts_flash_config(TS_FLASH_BWD_DKDV, 4096, 4096, 8, 8, 256, 1, 8, 9, &kv), TS_OK);
    cr_assert_eq(ts_flash_config(TS_FLASH_BWD_DQ, 4096, 4096, 8, 8, 256, 1, 8, 9, &q), TS_OK);
    cr_expect(kv.warps == 1 && q.warps == 2 && kv.dp == 256, "8.9: dK, dV %d warps, dQ %d", kv.warps, q.warps);
    cr_assert_eq(ts_flash_config(TS_FLASH_BWD_DKDV, 4096, 4096, 8, 8, 256, 1, 9, 0, &kv), TS_OK);
    cr_expect_eq(kv.warps, 8);
    cr_assert_eq(ts_flash_config(TS_FLASH_FWD, 4096, 4096, 8, 8, 200, 1, 9, 0, &h), TS_OK);
    cr_expect(h.dp == 256 && h.bc == 32, "D=200 runs at width %d with %d keys a step", h.dp, h.bc);
}

/* The grid covers every row once: tiles × rows per tile reach the rows, one tile fewer would not;
 * heads on y (query heads, or kv heads for dK, dV), sequences on z; empty work launches nothing. */
Test(flash_launch, grid_covers_rows_and_heads) {
    const int rows[] = {1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 1000, 4096};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        for (int k = 0; k < 3; k++) {
            ts_flash_cfg c;
            int Tq = rows[i], Tk = rows[i] + 3;
            cr_assert_eq(ts_flash_config(KINDS[k], Tq, Tk, 32, 8, 128, 3, 9, 0, &c), TS_OK);
            int by_keys = KINDS[k] == TS_FLASH_BWD_DKDV, n = by_keys ? Tk : Tq, tile = by_keys ? c.bc : c.br;
            cr_expect((long)c.grid_x * tile >= n && (long)(c.grid_x - 1) * tile < n, "kind %d rows %d: %u tiles of %d",
                      k, n, c.grid_x, tile);
            cr_expect_eq(c.warps * 16, tile, "a warp per 16 rows of the tile");
            cr_expect_eq(c.grid_y, by_keys ? 8u : 32u);
            cr_expect_eq(c.grid_z, 3u);
        }
    ts_flash_cfg c;
    cr_assert_eq(ts_flash_config(TS_FLASH_FWD, 0, 64, 8, 8, 64, 1, 9, 0, &c), TS_OK);
    cr_expect_eq(c.grid_x, 0u);
    cr_assert_eq(ts_flash_config(TS_FLASH_BWD_DKDV, 64, 0, 8, 8, 64, 1, 9, 0, &c), TS_OK);
    cr_expect_eq(c.grid_x, 0u);
}

/* GQA: each kv head serves H / KV consecutive query heads; MHA (KV = H) is the identity, MQA
 * (KV = 1) maps all to 0. */
Test(flash_launch, gqa_head_mapping) {
    int served[8] = {0};
    for (int h = 0; h < 32; h++) {
        int g = ts_flash_kv_head(h, 32, 8);
        cr_assert(g >= 0 && g < 8);
        cr_expect_eq(g, h / 4);
        served[g]++;
    }
    for (int g = 0; g < 8; g++) cr_expect_eq(served[g], 4);
    for (int h = 0; h < 16; h++) cr_expect_eq(ts_flash_kv_head(h, 16, 16), h);
    for (int h = 0; h < 16; h++) cr_expect_eq(ts_flash_kv_head(h, 16, 1), 0);
}

Test(flash_launch, strides_hold_their_rows) {
    cr_expect_eq(ts_flash_check_strides(512, 128, 128, 512, 8, 2, 64), TS_OK);
    cr_expect_eq(ts_flash_check_strides(1024, 384, 384, 512, 8, 2, 64), TS_OK, "wider rows (a fused QKV buffer)");
    ts_error_clear();
    cr_expect_eq(ts_flash_check_strides(512, 127, 128, 512, 8, 2, 64), TS_ERR_INPUT);
    cr_expect(strstr(ts_error_message(), "ldk=127") != NULL, "%s", ts_error_message());
    cr_expect_eq(ts_flash_check_strides(512, 128, 128, 500, 8, 2, 64), TS_ERR_INPUT);
}

/* The tile loaders' thread-to-group maps visit every group of 4 columns of every row once, in row
 * order and by warp; by warp, a warp's 32 groups are 8 rows × 4 adjacent groups. */
Test(flash_launch, tile_groups_cover_each_element_once) {
    const int rows[] = {8, 16, 32, 64, 128};
    for (int w = 0; w < TS_FLASH_N_WIDTHS; w++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (int by_warp = 0; by_warp < 2; by_warp++) {
                int dp = TS_FLASH_WIDTHS[w], n = rows[ri] * dp / 4;
                unsigned char seen[128 * 64] = {0};
                for (int i = 0; i < n; i++) {
                    int r, c;
                    ts_flash_tile_group(i, dp, by_warp, &r, &c);
                    cr_assert(r >= 0 && r < rows[ri] && c >= 0 && c < dp && c % 4 == 0, "dp %d i %d: (%d, %d)", dp, i,
                              r, c);
                    cr_assert_eq(seen[r * (dp / 4) + c / 4]++, 0, "dp %d rows %d by_warp %d: (%d, %d) twice", dp,
                                 rows[ri], by_warp, r, c);
                    if (by_warp && i % 32 == 0) {
                        int r1, c1;
                        ts_flash_tile_group(i + 31, dp, by_warp, &r1, &c1);
                        cr_assert(r1 == r + 7 && c1 == c + 12, "a warp spans 8 rows x 16 columns");
                    }
                }
            }
}
