/* Child processes of tessera (see spawn.h). */
#include "common/spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/interrupt.h"
#include "common/json.h"

extern char **environ;

/* Runs the child with `fa` and waits for it; TS_OK when it exits 0. */
static ts_status spawn_wait(const char *const *argv, posix_spawn_file_actions_t *fa, int rc) {
    /* posix_spawn takes char *const[]; copy the pointers rather than cast const away. */
    char *args[64];
    size_t n = 0;
    while (argv[n] && n < 63) n++;
    memcpy(args, argv, n * sizeof *args);
    args[n] = NULL;
    pid_t pid = 0;
    /* After SIGINT / SIGTERM (common/interrupt.h) nothing new starts: the work unwinds. */
    if (ts_interrupted()) return TS_FAIL(TS_ERR_EXTERNAL, "interrupted before %s %s", argv[0], argv[1]);
    if (rc == 0) rc = posix_spawn(&pid, args[0], fa, NULL, args, environ);
    if (rc != 0) return TS_FAIL(TS_ERR_EXTERNAL, "cannot start %s %s: %s", argv[0], argv[1], strerror(rc));
    ts_interrupt_child(pid);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            ts_interrupt_child(0);
            return TS_FAIL(TS_ERR_EXTERNAL, "waitpid: %s", strerror(errno));
        }
    ts_interrupt_child(0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return TS_OK;
    char line[512] = "";
    for (int i = 1; argv[i] && strlen(line) + strlen(argv[i]) + 2 < sizeof line; i++)
        strcat(strcat(line, " "), argv[i]);
    if (WIFSIGNALED(status))
        return TS_FAIL(TS_ERR_EXTERNAL, "tessera%s was killed by signal %d", line, WTERMSIG(status));
    return TS_FAIL(TS_ERR_EXTERNAL, "tessera%s failed with exit status %d (its message is above)", line,
                   WEXITSTATUS(status));
}

ts_status ts_spawn(const char *const *argv, const char *stdout_path) {
    posix_spawn_file_actions_t fa;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return TS_FAIL(TS_ERR_EXTERNAL, "posix_spawn_file_actions_init failed");
    ts_status res;
    if (stdout_path == NULL) {
        int rc = posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
        res = spawn_wait(argv, &fa, rc);
    } else {
        /* Into a temporary file renamed into place only when the child succeeds: a child that
         * fails or is killed leaves no truncated output behind. */
        ts_atomic_file af;
        res = ts_atomic_open(stdout_path, &af);
        if (res == TS_OK) {
            int rc = posix_spawn_file_actions_adddup2(&fa, fileno(af.f), STDOUT_FILENO);
            res = spawn_wait(argv, &fa, rc);
            if (res == TS_OK) res = ts_atomic_commit(&af);
            else ts_atomic_abort(&af);
        }
    }
    posix_spawn_file_actions_destroy(&fa);
    return res;
}
