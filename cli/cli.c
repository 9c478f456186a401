/* Flag parsing and error exits shared by the subcommands (see cli.h). */
#include "cli/cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int64_t cli_int(const char *cmd, const char *flag, const char *text, int64_t min, int64_t max) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    long long mult = 1;
    if (end && (*end == 'k' || *end == 'K')) mult = 1024, end++;
    else if (end && (*end == 'm' || *end == 'M')) mult = 1048576, end++;
    if (errno || end == text || *end != '\0' || (v != 0 && (v > max / mult || v < min / mult)) ||
        v * mult < min || v * mult > max)
        cli_usage_error(cmd, "%s: expected an integer in [%lld, %lld], got \"%s\"", flag,
                        (long long)min, (long long)max, text);
    return v * mult;
}

void cli_fail(const char *cmd, ts_status st) {
    fprintf(stderr, "tessera %s: %s\n", cmd, ts_error_message());
    if (getenv("TESSERA_DEBUG")) fprintf(stderr, "  (raised at %s)\n", ts_error_where());
    exit(ts_exit_code(st));
}

void cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tessera %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'tessera %s --help'.\n", cmd);
    exit(2);
}
