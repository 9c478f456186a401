/* Flag parsing and error exits shared by the subcommands (see cli.h). */
#include "cli/cli.h"
#include "common/interrupt.h"
#include "common/output.h"
#include "program/program.h"

#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "reports/numfmt.h"

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

double cli_num(const char *cmd, const char *flag, const char *text, double min, double max) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end != '\0' || !(v >= min && v <= max))
        cli_usage_error(cmd, "%s: expected a number in [%g, %g], got \"%s\"", flag, min, max, text);
    return v;
}

double cli_fraction(const char *cmd, const char *flag, const char *text, double min, double max) {
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (end != text && strcmp(end, "%") == 0) v /= 100, end++;
    if (errno || end == text || *end != '\0' || !(v >= min && v <= max))
        cli_usage_error(cmd, "%s: expected a fraction in [%g, %g] (or a percentage such as 5%%), got \"%s\"", flag,
                        min, max, text);
    return v;
}

double cli_tokens(const char *cmd, const char *flag, const char *text) {
    double v = ts_parse_tokens(text);
    if (!(v >= 1 && v <= 1e18))
        cli_usage_error(cmd, "%s: expected a token count in [1, 1e18] such as 2T, 300B or 1.5e12, got \"%s\"", flag,
                        text);
    return v;
}

void cli_list_check(const char *cmd, const char *flag, const char *text) {
    size_t n = strlen(text);
    /* strtok_r would skip an empty item: "a,,b" is a typo to refuse, not two items */
    if (n == 0 || text[0] == ',' || text[n - 1] == ',' || strstr(text, ",,"))
        cli_usage_error(cmd, "%s: expected a comma-separated list, got an empty item in \"%s\"", flag, text);
}

void cli_fail(const char *cmd, ts_status st) {
    fprintf(stderr, "tessera %s: %s\n", cmd, ts_error_message());
    if (getenv("TESSERA_DEBUG")) fprintf(stderr, "  (raised at %s)\n", ts_error_where());
    exit(ts_exit_code(st));
}

void cli_max_ops(const char *cmd, const char *text) {
    ts_program_set_max_ops(cli_int(cmd, "--max-ops", text, 1000, 1LL << 30));
}

void cli_output_check(const char *cmd, const char *flag, const char *path) {
    if (path == NULL) return;
    /* "" would pass as a new path and fail only at the rename, after the work */
    if (path[0] == '\0') cli_usage_error(cmd, "%s: expected a file name, got \"\"", flag);
    ts_status st = ts_output_check(path);
    if (st != TS_OK) cli_fail(cmd, st);
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

int cli_name_index(const char *const *names, const char *text) {
    for (int i = 0; names[i]; i++)
        if (strcmp(text, names[i]) == 0) return i;
    return -1;
}

int cli_enum(const char *cmd, const char *flag, const char *text, const char *const *names) {
    int found = cli_name_index(names, text);
    if (found >= 0) return found;
    char list[256] = "";
    size_t n = 0;
    for (int i = 0; names[i] && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i == 0 ? "" : names[i + 1] ? ", " : " or ", names[i]);
    cli_usage_error(cmd, "%s: expected %s, got \"%s\"", flag, list, text);
}

_Noreturn void cli_bad_option(const char *cmd, int c, char **argv) {
    const char *arg = argv[optind - 1];
    if (c == ':') cli_usage_error(cmd, "%s needs a value", arg);
    /* getopt_long sets optopt to a known long option's value when it was given a value it does
     * not take (--no-prune=3), and to 0 for an unknown long option; a short option's is its
     * letter. */
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    if (optopt && eq) cli_usage_error(cmd, "%.*s takes no value, got \"%s\"", (int)(eq - arg), arg, arg);
    if (optopt > 0 && optopt < 128 && isprint(optopt)) cli_usage_error(cmd, "unknown option \"-%c\"", optopt);
    cli_usage_error(cmd, "unknown option \"%s\"", arg);
}

void cli_self_path(const char *cmd, char *buf, size_t cap) {
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) cli_usage_error(cmd, "cannot find this program's own path (/proc/self/exe)");
    buf[n] = '\0';
}

void cli_launch_mpirun(const char *cmd, int ranks, int argc, char **argv) {
    char self[4096];
    cli_self_path(cmd, self, sizeof self);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    char np[16], name[64];
    snprintf(np, sizeof np, "%d", ranks);
    snprintf(name, sizeof name, "%s", cmd);
    char **args = calloc((size_t)argc + 12, sizeof *args);
    if (args == NULL) cli_usage_error(cmd, "out of memory");
    int k = 0;
    args[k++] = "mpirun";
    if (geteuid() == 0) args[k++] = "--allow-run-as-root";
    /* Past the cores, each rank is bound to one core, round-robin (rank r on core r mod cores):
     * a rank waiting in Open MPI's degraded mode yields its core to the ranks bound beside it,
     * which the simulator's sharing of the cores assumes (sim/cores.h), while unbound ranks
     * drift, a waiting rank holding a core as the ranks it waits for queue on another. Unbound,
     * the oversubscribed cases of `tessera validate` came out -6% to -23% in two runs; bound,
     * -10% to +8% (docs/calibration-and-validation.md, oversubscribed ranks). Within the cores
     * ranks stay unbound: the machine's other work is free to move them. */
    if (ranks > cores) {
        args[k++] = "--oversubscribe";
        args[k++] = "--map-by";
        args[k++] = "core";
        args[k++] = "--bind-to";
        args[k++] = "core:overload-allowed";
        fprintf(stderr, "tessera %s: %d ranks on %ld cores: oversubscribing, each rank bound to a core, round-robin\n",
                cmd, ranks, cores);
    } else {
        args[k++] = "--bind-to";
        args[k++] = "none";
    }
    args[k++] = "-np";
    args[k++] = np;
    args[k++] = self;
    args[k++] = name;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    fprintf(stderr, "tessera %s: starting mpirun -np %d\n", cmd, ranks);
    fflush(stderr);
    fflush(stdout);
    char what[96];
    snprintf(what, sizeof what, "mpirun and its %d rank%s", ranks, ranks == 1 ? "" : "s");
    ts_interrupt_install(cmd, what, TS_INTERRUPT_DEFER);
    setenv("TESSERA_INTERRUPT_QUIET", "1", 1); /* the ranks: this process says it once */
    pid_t pid = fork();
    if (pid < 0) cli_usage_error(cmd, "cannot start mpirun: fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL); /* mpirun as usual, though run's launcher ignores it */
        execvp("mpirun", args);
        fprintf(stderr, "tessera %s: cannot start mpirun (is Open MPI installed? run scripts/deps.sh)\n", cmd);
        _exit(2);
    }
    ts_interrupt_child(pid);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) cli_usage_error(cmd, "waitpid on mpirun: %s", strerror(errno));
    ts_interrupt_child(0);
    if (ts_interrupted()) ts_interrupt_exit();
    exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}
