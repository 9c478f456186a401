/* `tessera models` and `tessera systems`: the zoo as tables. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/paths.h"
#include "models/model.h"
#include "models/system.h"

#define ZOO_MAX 256

static int wants_help(int argc, char **argv, const char *cmd, const char *what) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: tessera %s\n\nLists the %s in %s/models/%s (set TESSERA_DATA to use another "
                   "zoo). Any listed name can be passed where a %s is expected.\n",
                   cmd, what, ts_data_dir(), strcmp(cmd, "models") == 0 ? "llm" : "systems",
                   strcmp(cmd, "models") == 0 ? "--model" : "--system");
            return 1;
        }
        cli_usage_error(cmd, "unexpected argument \"%s\"", argv[i]);
    }
    return 0;
}

int cmd_models(int argc, char **argv) {
    if (wants_help(argc, argv, "models", "model specs")) return 0;
    static char names[ZOO_MAX][64];
    int n = ts_zoo_list("models/llm", names, ZOO_MAX);
    printf("# %-22s %6s %7s %6s %4s %8s %10s %10s\n", "model", "layers", "hidden", "heads", "kv",
           "experts", "params(B)", "active(B)");
    for (int i = 0; i < n; i++) {
        ts_model m;
        ts_status st = ts_model_load(names[i], &m);
        if (st != TS_OK) cli_fail("models", st);
        ts_param_count pc;
        ts_model_params(&m, &pc);
        printf("  %-22s %6d %7lld %6d %4d %8d %10.2f %10.2f\n", names[i], m.layers,
               (long long)m.hidden, m.heads, m.kv_heads, m.moe.experts, pc.total / 1e9, pc.active / 1e9);
    }
    return 0;
}

int cmd_systems(int argc, char **argv) {
    if (wants_help(argc, argv, "systems", "system specs")) return 0;
    static char names[ZOO_MAX][64];
    int n = ts_zoo_list("models/systems", names, ZOO_MAX);
    printf("# %-16s %-26s %7s %10s %9s %9s %9s %5s %9s %9s %6s %5s %8s %6s\n", "system", "gpu", "HBM(GB)",
           "bf16(TF/s)", "HBM(TB/s)", "link(GB/s)", "nic(GB/s)", "gpn", "fp8(TF/s)", "fp4(TF/s)", "domain", "tiers",
           "USD/GPU-h", "W/GPU");
    for (int i = 0; i < n; i++) {
        ts_system s;
        ts_status st = ts_system_load(names[i], &s);
        if (st != TS_OK) cli_fail("systems", st);
        printf("  %-16s %-26s %7.0f %10.1f %9.2f %9.0f %9.0f %5d %9.0f %9.0f %6d %5d %8.2f %6.0f\n", names[i],
               s.gpu_name, s.hbm_bytes / 1e9, s.peak_flops[TS_DTYPE_BF16] / 1e12, s.hbm_bytes_per_s / 1e12,
               s.link_bytes_per_s / 1e9, s.nic_bytes_per_s / 1e9, s.gpus_per_node, s.peak_flops[TS_DTYPE_FP8] / 1e12,
               s.peak_fp4_flops / 1e12, ts_system_domain_gpus(&s), s.n_tiers, s.price_per_gpu_hour,
               ts_system_power_per_gpu_w(&s));
    }
    return 0;
}
