/* Shared pieces of the `tessera` subcommands: the command table entry type and flag parsers
 * that exit with status 2 and a one-line message on misuse (edges may exit; the library never). */
#ifndef TS_CLI_H
#define TS_CLI_H

#include <stdint.h>

#include "common/status.h"

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} ts_command;

/* Integer flag value with an optional k/m suffix (×1024, ×1048576), in [min, max]. */
int64_t cli_int(const char *cmd, const char *flag, const char *text, int64_t min, int64_t max);
/* Prints "tessera CMD: message" to stderr and exits with the status's exit code. */
_Noreturn void cli_fail(const char *cmd, ts_status st);
/* Prints "tessera CMD: <fmt>" and "Try 'tessera CMD --help'." to stderr, exits 2. */
_Noreturn void cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int cmd_plan(int argc, char **argv);
int cmd_models(int argc, char **argv);
int cmd_systems(int argc, char **argv);

#endif
