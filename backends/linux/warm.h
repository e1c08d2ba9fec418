/* A session's warm launcher, the supervisor's side (protocol.h: A3S_FD_WARM): started
 * ahead of its command (in the idle worker that will serve it), it enters the session's
 * namespaces and makes the command's own meanwhile; the command's descriptors, argv and
 * environment are handed over when it comes, and the launcher goes on as one started for
 * it. What it cannot take is run by a launcher started then (exec.c). */
#ifndef A3S_WARM_H
#define A3S_WARM_H

#include <sys/types.h>

#include "a3s_sandbox.h"

typedef struct a3s_launch a3s_launch;

typedef struct a3s_warm {
    pid_t pid; /* -1: none */
    int ctl;   /* this end of its socket */
} a3s_warm;
#define A3S_WARM_NONE {-1, -1}

/* Start the launcher l describes (its argv with --join --warm and no program; its keep
 * fds those it holds for any command: consumed) with /dev/null as its stdio and its
 * socket at A3S_FD_WARM. -1 with err: none was started. */
int a3s_warm_start(a3s_warm *w, const a3s_launch *l, a3s_error *err);

/* Hand it the command: in_fd, out_fd and errout_fd as its 0, 1 and 2, l's keep fds it
 * does not hold yet (not .held) at their numbers (all of l's keep fds stay the caller's),
 * l's argv and envp. Waits until it is ready (2 s at most; not once l's cancel_fd is
 * readable). Returns its pid, the command's
 * launcher now and the caller's to supervise (w is none after); -1: it could not take it
 * (w is unchanged). */
pid_t a3s_warm_handover(a3s_warm *w, const a3s_launch *l, int in_fd, int out_fd,
                        int errout_fd);

/* Stop it and reap it; w is none after (a no-op when it is). */
void a3s_warm_discard(a3s_warm *w);

#endif
