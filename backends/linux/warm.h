/* A warm launcher, the supervisor's side (protocol.h: A3S_FD_WARM): started ahead of its
 * command, it makes the command's namespaces meanwhile; the command's descriptors, argv
 * and environment are handed over when it comes, and the launcher goes on as one started
 * for it. What it cannot take is run by a launcher started then (exec.c). A session's is
 * started on the host by the idle worker that will serve the command and enters the
 * session's namespaces (--join); a fresh run's is bubblewrap's first program, started
 * while the run's policy is still being evaluated (ahead.h). */
#ifndef A3S_WARM_H
#define A3S_WARM_H

#include <stdbool.h>
#include <sys/types.h>

#include "a3s_sandbox.h"

typedef struct a3s_launch a3s_launch;

typedef struct a3s_warm {
    pid_t pid;  /* -1: none */
    int ctl;    /* this end of its socket */
    int status; /* under bubblewrap: the read end of its --json-status-fd (owned), or -1 */
    /* hold_mnt: keep the mount namespace it sends with "R" (protocol.h) in mnt (owned, or
     * -1): the command's, whose teardown is then its holder's, once it closes it. */
    bool hold_mnt;
    int mnt;
} a3s_warm;
#define A3S_WARM_NONE {-1, -1, -1, false, -1}

/* Start the launcher l describes (its argv with --warm and no program; its keep fds those
 * it holds for any command: consumed) with /dev/null as its stdio and its socket at
 * A3S_FD_WARM. -1 with err: none was started. */
int a3s_warm_start(a3s_warm *w, const a3s_launch *l, a3s_error *err);

/* Hand it the command: in_fd, out_fd and errout_fd as its 0, 1 and 2, l's keep fds it
 * does not hold yet (not .held) at their numbers (all of l's keep fds stay the caller's),
 * l's argv and envp. Waits until it is ready (2 s at most; not once l's cancel_fd is
 * readable). Returns its pid, the command's launcher now and the caller's to supervise
 * (w is none after, but for its status, which the supervisor takes, and with hold_mnt
 * its mount namespace, the caller's to take); -1: it could not take it (w is unchanged
 * but for mnt, which may be set). */
pid_t a3s_warm_handover(a3s_warm *w, const a3s_launch *l, int in_fd, int out_fd,
                        int errout_fd);

/* Stop it and reap it, and close its status and mnt; w is none after (a no-op when it
 * is). */
void a3s_warm_discard(a3s_warm *w);

#endif
