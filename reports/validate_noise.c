/* The noise verdict of `tessera validate` (see validate_noise.h). */
#include "reports/validate_noise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/json.h"
#include "common/stats.h"

/* (max − min) / median of the numbers of `arr` from index `from`; 0 when fewer than two. */
static double spread_of(const cJSON *arr, int from) {
    int n = cJSON_GetArraySize(arr) - from;
    if (n < 2) return 0;
    double *v = malloc((size_t)n * sizeof *v), lo = INFINITY, hi = -INFINITY;
    if (v == NULL) return 0;
    int k = 0;
    for (const cJSON *e = cJSON_GetArrayItem(arr, from); e; e = e->next)
        if (cJSON_IsNumber(e)) {
            v[k++] = e->valuedouble;
            lo = fmin(lo, e->valuedouble), hi = fmax(hi, e->valuedouble);
        }
    double med = k > 1 ? ts_median(v, k) : 0;
    free(v);
    return med > 0 ? (hi - lo) / med : 0;
}

ts_status ts_run_spreads(const char *run_json, int warmup, double *step_spread, double *gauge_spread) {
    cJSON *root = NULL;
    TS_CHECK(ts_json_load_file(run_json, &root));
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(root, "step_s");
    const cJSON *each = cJSON_GetObjectItemCaseSensitive(steps, "each");
    const cJSON *gauge = cJSON_GetObjectItemCaseSensitive(root, "gauge");
    const cJSON *speeds = cJSON_GetObjectItemCaseSensitive(gauge, "flops_per_s");
    ts_status res = TS_OK;
    if (!cJSON_IsArray(each))
        res = TS_FAIL(TS_ERR_INPUT, "%s: $.step_s.each: expected an array of step times", run_json);
    *step_spread = res == TS_OK ? spread_of(each, warmup) : 0;
    *gauge_spread = cJSON_IsArray(speeds) ? spread_of(speeds, warmup) : 0;
    cJSON_Delete(root);
    return res;
}

void ts_validate_noise_start(ts_validate_noise *n) {
    *n = (ts_validate_noise){.load_avg_1min = -1, .cores = sysconf(_SC_NPROCESSORS_ONLN)};
    double load[1];
    if (getloadavg(load, 1) == 1) n->load_avg_1min = load[0];
}

void ts_validate_noise_judge(ts_validate_noise *n, double step_spread, double gauge_spread, double repeat_spread) {
    n->step_spread = step_spread, n->gauge_spread = gauge_spread, n->repeat_spread = repeat_spread;
    n->spread = isfinite(repeat_spread) ? fmax(step_spread, repeat_spread) : step_spread;
    n->judgeable = n->spread <= TS_VALIDATE_TARGET_MEDIAN;
    const char *what = isfinite(repeat_spread) && repeat_spread >= step_spread ? "passes of the same case"
                                                                              : "steps of the same run";
    char load[64] = "";
    if (n->load_avg_1min >= 0)
        snprintf(load, sizeof load, "; load average %.1f on %ld cores before it ran", n->load_avg_1min, n->cores);
    if (n->judgeable)
        snprintf(n->verdict, sizeof n->verdict, "steady enough to judge %.0f%%: %s spread %.1f%% (median)%s",
                 100 * TS_VALIDATE_TARGET_MEDIAN, what, 100 * n->spread, load);
    else
        snprintf(n->verdict, sizeof n->verdict, "too noisy to judge %.0f%%: %s spread %.1f%% (median; the gauge "
                 "saw %.1f%%)%s", 100 * TS_VALIDATE_TARGET_MEDIAN, what, 100 * n->spread, 100 * gauge_spread, load);
}
