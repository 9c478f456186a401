/* `tessera compare`: how far is the simulation from the measurement, and where? Aligns a
 * simulated and a measured trace of the same step program op by op (sim/compare.h) and prints
 * the error by op kind, by stage and for the step. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/json.h"
#include "sim/compare.h"
#include "sim/compare_ops.h"
#include "sim/compare_wait.h"
#include "sim/replay.h"

static void help(void) {
    printf("usage: tessera compare --sim sim.trace.json --measured run.trace.json [--ops N] [--json]\n"
           "       tessera compare --measured run.trace.json --replay --plan plan.json [--index I] [--json]\n"
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
           "      --ops N           list the N ops furthest off (name, stage, micro-batch, simulated,\n"
           "                        measured, error); --json holds every op under \"op_list\"\n"
           "      --replay          replay the measured trace: simulate the plan's layout (every rank)\n"
           "                        with each compute op taking the time it took in the run, the rest\n"
           "                        (communication, schedule, waits) modelled, and compare the step\n"
           "  -p, --plan FILE       with --replay: the plan the run trained (holds model and system)\n"
           "  -i, --index I         with --replay: which layout of the plan, 1-based (default 1)\n"
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

static void print_ops(const ts_compare_ops *o, int n) {
    if (n > o->n) n = o->n;
    printf("# the %d ops furthest off, of %d\n", n, o->n);
    printf("%-5s %5s %5s %3s %-34s %-12s %12s %12s %9s\n", "#rank", "stage", "op", "mb", "name", "kind",
           "simulated_s", "measured_s", "error");
    for (int i = 0; i < n; i++) {
        const ts_compare_op *x = &o->ops[i];
        printf("%-5d %5d %5d %3d %-34s %-12s %12.6f %12.6f", x->rank, x->stage, x->op, x->microbatch, x->name,
               x->kind, x->simulated_s, x->measured_s);
        print_pct(x->error);
        printf("\n");
    }
}

static void print_waits(const ts_compare_waits *w) {
    printf("%-28s %6s %12s %12s %9s %12s %12s\n", "#communication", "ops", "simulated_s", "transfer_s", "error",
           "sim_wait_s", "wait_s");
    for (int k = 0; k < w->n_kinds; k++) {
        const ts_wait_kind *x = &w->kinds[k];
        printf("%-28s %6d %12.6f %12.6f", x->kind, x->ops, x->simulated_s, x->measured_transfer_s);
        print_pct(x->transfer_error);
        printf(" %12.6f %12.6f\n", x->simulated_wait_s, x->measured_wait_s);
    }
    printf("# transfer_s: measured after the last peer arrived; wait_s: measured before it (arrival skew);\n"
           "# sim_wait_s: the simulator's own waits before the same ops\n");
}

static void print_replay(const ts_replay *r) {
    printf("# replay: %s, %s: %lld compute ops and every transfer at their measured times; dependencies,\n"
           "# schedule and waits simulated\n", r->model, r->layout, (long long)r->ops);
    printf("# replayed step %.6f s, measured %.6f s (its ops %.6f s), error", r->replayed_step_s, r->measured_step_s,
           r->measured_ops_s);
    print_pct(r->error);
    printf("\n# with the transfers modelled: %.6f s, error", r->modelled_comm_step_s);
    print_pct(r->modelled_comm_error);
    printf("\n");
}

/* The JSON document: the comparison (with "op_list") when --sim was given, "replay" with --replay. */
static ts_status build_json(const ts_compare *cmp, const ts_compare_ops *ops, const ts_compare_waits *w,
                            const ts_replay *rp, cJSON **out) {
    cJSON *root = NULL, *item = NULL;
    ts_status st = cmp ? ts_compare_json(cmp, &root) : TS_OK;
    if (st == TS_OK && root == NULL && (root = cJSON_CreateObject()) == NULL)
        st = TS_FAIL(TS_ERR_NOMEM, "cJSON: out of memory");
    if (st == TS_OK && ops && (st = ts_compare_ops_json(ops, -1, &item)) == TS_OK)
        cJSON_AddItemToObject(root, "op_list", item);
    if (st == TS_OK && w) st = ts_compare_waits_json(w, root);
    if (st == TS_OK && rp && (st = ts_replay_json(rp, &item)) == TS_OK) cJSON_AddItemToObject(root, "replay", item);
    if (st != TS_OK) cJSON_Delete(root);
    else *out = root;
    return st;
}

int cmd_compare(int argc, char **argv) {
    const char *cmd = "compare", *sim = NULL, *measured = NULL, *plan = NULL;
    int json = 0, replay = 0, n_ops = 0, index = 0;
    double step_s = 0;
    enum { OPT_JSON = 256, OPT_STEP, OPT_REPLAY, OPT_OPS };
    static const struct option longs[] = {
        {"sim", required_argument, 0, 's'},   {"measured", required_argument, 0, 'm'},
        {"step-s", required_argument, 0, OPT_STEP}, {"json", no_argument, 0, OPT_JSON},
        {"replay", no_argument, 0, OPT_REPLAY}, {"ops", required_argument, 0, OPT_OPS},
        {"plan", required_argument, 0, 'p'},  {"index", required_argument, 0, 'i'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":s:m:p:i:h", longs, NULL)) != -1) {
        switch (c) {
        case 's': sim = optarg; break;
        case 'm': measured = optarg; break;
        case 'p': plan = optarg; break;
        case 'i': index = (int)cli_int(cmd, "--index", optarg, 1, 1000000); break;
        case OPT_REPLAY: replay = 1; break;
        case OPT_OPS: n_ops = (int)cli_int(cmd, "--ops", optarg, 1, 1000000000); break;
        case OPT_STEP: step_s = cli_num(cmd, "--step-s", optarg, 1e-9, 1e9); break;
        case OPT_JSON: json = 1; break;
        case 'h': help(); return 0;
        default: cli_bad_option(cmd, c, argv);
        }
    }
    if (optind < argc) cli_usage_error(cmd, "unexpected argument \"%s\"", argv[optind]);
    if (!measured) cli_usage_error(cmd, "--measured is required");
    if (!sim && !replay) cli_usage_error(cmd, "--sim is required (or --replay with --plan)");
    if (replay && !plan) cli_usage_error(cmd, "--replay needs --plan, the plan the run trained");
    if (!replay && (plan || index)) cli_usage_error(cmd, "--plan and --index go with --replay");
    if (!sim && (n_ops || step_s > 0)) cli_usage_error(cmd, "--ops and --step-s compare with --sim");

    ts_compare cmp = {0};
    ts_compare_ops ops = {0};
    ts_compare_waits waits = {0};
    ts_replay rp;
    ts_status st = sim ? ts_compare_traces(sim, measured, &cmp) : TS_OK;
    if (st == TS_OK && sim && (n_ops || json)) st = ts_compare_ops_read(sim, measured, cmp.speed, &ops);
    if (st == TS_OK && sim) st = ts_compare_waits_read(sim, measured, cmp.speed, &waits);
    if (st == TS_OK && replay) st = ts_replay_plan(plan, index ? index - 1 : 0, measured, &rp);
    if (st != TS_OK) {
        ts_compare_free(&cmp);
        ts_compare_ops_free(&ops);
        cli_fail(cmd, st);
    }
    if (step_s > 0) ts_compare_set_measured_step(&cmp, step_s * cmp.speed, step_s);
    if (json) {
        cJSON *root = NULL;
        st = build_json(sim ? &cmp : NULL, sim ? &ops : NULL, sim ? &waits : NULL, replay ? &rp : NULL, &root);
        if (st == TS_OK) st = ts_json_write_file("-", root);
        cJSON_Delete(root);
    } else {
        if (sim) print_table(&cmp);
        if (sim) print_waits(&waits);
        if (n_ops) print_ops(&ops, n_ops);
        if (replay) print_replay(&rp);
        if (fflush(stdout) != 0) st = TS_FAIL(TS_ERR_IO, "stdout: write failed");
    }
    ts_compare_ops_free(&ops);
    ts_compare_waits_free(&waits);
    ts_compare_free(&cmp);
    if (st != TS_OK) cli_fail(cmd, st);
    return 0;
}
