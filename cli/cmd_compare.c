/* `tessera compare`: how far is the simulation from the measurement, and where? Aligns a
 * simulated and a measured trace of the same step program op by op (sim/compare.h) and prints
 * the error by op kind, by stage and for the step. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "sim/compare.h"

static void help(void) {
    printf("usage: tessera compare --sim sim.trace.json --measured run.trace.json [--json]\n"
           "\n"
           "Aligns a simulated trace (tessera sim --trace) with a measured one (tessera run --trace)\n"
           "of the same layout, op by op (rank, op index, name), and reports the error\n"
           "(simulated - measured) / measured by op kind (collectives by collective), by pipeline\n"
           "stage and for the step. Only the ranks the simulation holds are compared (tessera sim\n"
           "simulates one rank per stage unless --full). When both traces carry the speed gauge\n"
           "of CPU ranks (a simulation on a calibrated profile, a run on CPU ranks), measured\n"
           "times are first put at the calibration's speed: x run's gauge / profile's gauge.\n"
           "\n"
           "  -s, --sim FILE        the simulated trace\n"
           "  -m, --measured FILE   the measured trace\n"
           "      --step-s S        the measured step time to compare with, as timed (default: the\n"
           "                        traced step's; the traced step's speed applies to it)\n"
           "      --json            print the comparison as JSON instead of a table\n"
           "  -h, --help            this help\n"
           "\n"
           "Exit status: 0 ok, 2 bad input (including traces of different programs).\n");
}

static void print_pct(double error) {
    if (isfinite(error)) printf(" %+8.1f%%", 100 * error);
    else printf(" %9s", "-");
}

static void print_table(const ts_compare *c) {
    printf("# %s, %s: %d ops compared\n", c->model, c->layout, c->ops);
    printf("%-28s %6s %12s %12s %9s %12s\n", "#kind", "ops", "simulated_s", "measured_s", "error", "median|op err|");
    for (int k = 0; k < c->n_kinds; k++) {
        const ts_compare_kind *x = &c->kinds[k];
        printf("%-28s %6d %12.6f %12.6f", x->kind, x->ops, x->simulated_s, x->measured_s);
        print_pct(x->error);
        if (isfinite(x->median_abs_op_error)) printf(" %11.1f%%\n", 100 * x->median_abs_op_error);
        else printf(" %12s\n", "-");
    }
    printf("%-28s %6s %12s %12s %9s\n", "#stage", "ranks", "simulated_s", "measured_s", "error");
    for (int i = 0; i < c->n_stages; i++) {
        const ts_compare_stage *x = &c->stages[i];
        printf("%-28d %6d %12.6f %12.6f", x->stage, x->ranks, x->simulated_s, x->measured_s);
        print_pct(x->error);
        printf("\n");
    }
    printf("# step: simulated %.6f s, measured %.6f s, error", c->simulated_step_s, c->measured_step_s);
    print_pct(c->step_error);
    printf("\n");
    if (c->gauged)
        printf("# speed: the run's gauge read %.3fx the calibration's, so measured times are at the calibration's\n"
               "# speed (the step as timed: %.6f s)\n",
               c->speed, c->measured_raw_step_s);
}

int cmd_compare(int argc, char **argv) {
    const char *cmd = "compare", *sim = NULL, *measured = NULL;
    int json = 0;
    double step_s = 0;
    enum { OPT_JSON = 256, OPT_STEP };
    static const struct option longs[] = {
        {"sim", required_argument, 0, 's'},   {"measured", required_argument, 0, 'm'},
        {"step-s", required_argument, 0, OPT_STEP}, {"json", no_argument, 0, OPT_JSON},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:m:h", longs, NULL)) != -1) {
        switch (c) {
        case 's': sim = optarg; break;
        case 'm': measured = optarg; break;
        case OPT_STEP: step_s = cli_num(cmd, "--step-s", optarg, 1e-9, 1e9); break;
        case OPT_JSON: json = 1; break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!sim || !measured) cli_usage_error(cmd, "--sim and --measured are required");

    ts_compare cmp;
    ts_status st = ts_compare_traces(sim, measured, &cmp);
    if (st != TS_OK) cli_fail(cmd, st);
    if (step_s > 0) ts_compare_set_measured_step(&cmp, step_s * cmp.speed, step_s);
    if (json) {
        cJSON *root = NULL;
        st = ts_compare_json(&cmp, &root);
        if (st == TS_OK) st = ts_json_write_file("-", root);
        cJSON_Delete(root);
    } else {
        print_table(&cmp);
        if (fflush(stdout) != 0) st = TS_FAIL(TS_ERR_IO, "stdout: write failed");
    }
    ts_compare_free(&cmp);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
