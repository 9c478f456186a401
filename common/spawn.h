/* Child processes: another tessera command run to completion, its output captured atomically
 * (`tessera validate` runs `tessera calibrate` and `tessera run` this way). */
#ifndef TS_SPAWN_H
#define TS_SPAWN_H

#include "common/status.h"

/* Runs argv (argv[0] a path, argv[1] the subcommand) as a child process with its stdout written
 * to `stdout_path` (NULL: discarded; stderr passes through) and waits for it; TS_ERR_EXTERNAL
 * naming the command and its exit status unless it exits 0. The file appears only when the child
 * succeeds (written atomically, common/json.h), never truncated. */
ts_status ts_spawn(const char *const *argv, const char *stdout_path);

#endif
