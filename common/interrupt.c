/* SIGINT / SIGTERM handling (see interrupt.h). Everything the handler does is async-signal-safe:
 * kill, unlink, write, _exit, and the line is formatted at install time. */
#include "common/interrupt.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/output.h"

static volatile sig_atomic_t received;
static volatile pid_t child;
static ts_interrupt_mode how;
static int quiet;
static char line_int[512], line_term[512];

static void say(int sig) {
    const char *line = sig == SIGINT ? line_int : line_term;
    if (!quiet) {
        ssize_t n = write(STDERR_FILENO, line, strlen(line));
        (void)n;
    }
}

static void on_signal(int sig) {
    if (received == 0) received = sig;
    ts_output_remove_temps();
    pid_t c = child;
    if (c > 0) kill(c, SIGTERM);
    if (how == TS_INTERRUPT_DEFER) return;
    say(sig);
    _exit(128 + sig);
}

void ts_interrupt_install(const char *cmd, const char *what, ts_interrupt_mode mode) {
    how = mode;
    quiet = what == NULL || getenv("TESSERA_INTERRUPT_QUIET") != NULL;
    if (what == NULL) what = "";
    snprintf(line_int, sizeof line_int, "tessera %s: interrupted by SIGINT: stopped %s; no output written\n", cmd, what);
    snprintf(line_term, sizeof line_term, "tessera %s: interrupted by SIGTERM: stopped %s; no output written\n", cmd, what);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void ts_interrupt_child(pid_t pid) {
    child = pid;
    /* A signal that came before the child existed reaches it too. */
    if (pid > 0 && received) kill(pid, SIGTERM);
}

int ts_interrupted(void) { return received; }

void ts_interrupt_exit(void) {
    int sig = received ? received : SIGTERM;
    ts_output_remove_temps();
    say(sig);
    exit(128 + sig);
}
