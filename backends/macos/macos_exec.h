/* What the macos-seatbelt backend does on macOS only (macos_exec.c, compiled there alone):
 * the scratch dir, and running `sandbox-exec -p PROFILE` in a process group of its own that
 * the deadline kills. */
#ifndef A3S_MACOS_EXEC_H
#define A3S_MACOS_EXEC_H

#include <stdint.h>

#include "a3s_sandbox.h"
#include "backend.h"

/* A fresh private scratch dir below tmp (malloc'd into *out). */
int a3s_macos_scratch_make(const char *tmp, char **out, a3s_error *err);
/* Remove the scratch dir and everything in it (links are removed, never followed). */
void a3s_macos_scratch_remove(const char *dir);

typedef struct a3s_macos_cmd {
    char *const *argv;  /* sandbox-exec -p PROFILE -- ... */
    char *const *envp;
    const char *cwd;
    int64_t output_bytes, nofile, core_bytes, file_size_bytes; /* the plan's limits */
} a3s_macos_cmd;

/* Run cmd under io to completion (backend.h run_exec): 0 with o filled, or -1 with err
 * when nothing ran. */
int a3s_macos_exec(const a3s_macos_cmd *cmd, const a3s_run_io *io, a3s_outcome *o,
                   a3s_error *err);

#endif
