/* SIGINT and SIGTERM for the long commands (`run`, `validate`, `calibrate`): one line naming what
 * was interrupted, exit status 128 + the signal (130, 143), nothing partial left behind.
 *
 * The handler removes the temporary files of writes in progress (common/output.h) and sends
 * SIGTERM to the child registered with ts_interrupt_child (mpirun forwards it to its ranks,
 * another tessera command does the same in turn). Then, in TS_INTERRUPT_EXIT mode, it prints the
 * line (unless quiet) and exits at once; in TS_INTERRUPT_DEFER mode it returns, and the caller's
 * work unwinds as a failure at its next check (ts_interrupted): a process that must clean up
 * more than files (a temporary folder) and spends its time waiting for children. */
#ifndef TS_INTERRUPT_H
#define TS_INTERRUPT_H

#include <sys/types.h>

typedef enum { TS_INTERRUPT_EXIT, TS_INTERRUPT_DEFER } ts_interrupt_mode;

/* Installs the handler for SIGINT and SIGTERM. `what` names what is interrupted ("mpirun and
 * its 4 ranks"); the line reads "tessera CMD: interrupted by SIGINT: stopped WHAT; no output
 * written". `what` NULL (an MPI rank: its launcher says it) or the environment variable
 * TESSERA_INTERRUPT_QUIET (set by a parent tessera that prints its own line) silences it. */
void ts_interrupt_install(const char *cmd, const char *what, ts_interrupt_mode mode);
/* The child process to pass the signal to while it runs (0: none). */
void ts_interrupt_child(pid_t pid);
/* The signal received (SIGINT, SIGTERM) or 0. */
int ts_interrupted(void);
/* Prints the line for the signal received and exits 128 + signal; call when ts_interrupted(). */
_Noreturn void ts_interrupt_exit(void);

#endif
