/* `tessera`: the entry point. Dispatches to one subcommand per file; each parses its flags and
 * calls the library. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/interrupt.h"
#include "common/output.h"

static const ts_command commands[] = {
    {"plan", "rank the parallel layouts of a model on a system", cmd_plan},
    {"sim", "simulate one training step of a layout, op by op", cmd_sim},
    {"run", "train a plan's layout for real on MPI ranks", cmd_run},
    {"report", "a capacity-planning report of a plan (HTML, Markdown, CSV, JSON)", cmd_report},
    {"sweep", "the best layout per system and GPU count, with cost per token", cmd_sweep},
    {"export", "a plan's layout as Megatron-LM arguments or a DeepSpeed config", cmd_export},
    {"calibrate", "measure this machine on MPI ranks and write it as a system spec", cmd_calibrate},
    {"compare", "compare a simulated and a measured trace op by op", cmd_compare},
    {"validate", "simulated vs measured step times over a matrix of layouts on this machine", cmd_validate},
    {"models", "list the model zoo", cmd_models},
    {"systems", "list the system zoo", cmd_systems},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: tessera <command> [options]   (tessera <command> --help for its options)\n\n"
               "commands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nexit status: 0 ok, 2 bad input, 3 nothing fits, 1 other errors\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* SIGINT / SIGTERM leave no temporary file behind (run, calibrate and validate
             * install their own handling, which stops their children first). */
            ts_interrupt_install(commands[i].name, "the command", TS_INTERRUPT_EXIT);
            int rc = commands[i].run(argc - 1, argv + 1);
            /* A table printed with unchecked printf fails here, not silently (a full disk,
             * /dev/full): the last flush of stdout is checked. */
            if (ts_stdout_finish() != TS_OK && rc == 0) {
                fprintf(stderr, "tessera %s: %s\n", commands[i].name, ts_error_message());
                return 1;
            }
            return rc;
        }
    fprintf(stderr, "tessera: unknown command \"%s\"\n", argv[1]);
    usage(stderr);
    return 2;
}
