/* The host-side mediator process of one mediated run: the program a3s-sandbox-mediator
 * (protocol.h, "The helper program"), started with posix_spawn, never a fork of the
 * calling process: in a multithreaded host a forked copy that goes on running library
 * code could wait forever on a lock another thread held at the fork. */
#ifndef A3S_MEDPROC_H
#define A3S_MEDPROC_H

#include <stddef.h>
#include <sys/types.h>

#include "a3s_sandbox.h"
#include "grant.h"

/* One started mediator. It dies with the thread that started it, which must be the one
 * that stops it (the same a3s_sandbox_exec call). pidfd means something only while
 * pid > 0, status once it was reaped. */
typedef struct a3s_medproc {
    pid_t pid;
    int stop_w;  /* closing it stops the mediator */
    int denials; /* memfd the mediator writes its refusals to (not visible inside) */
    int pidfd;   /* opened at once: a later kill can never reach a reused pid */
    int status;  /* its wait status once reaped, -1 when unknown */
} a3s_medproc;
#define A3S_MEDPROC_NONE                                                                           \
    {                                                                                              \
        .pid = -1, .stop_w = -1, .denials = -1, .pidfd = -1, .status = -1                          \
    }

/* Start the mediator at path (an executable already resolved and checked) for the n
 * grants g, and wait until it serves. Its environment takes from host_env (NULL-terminated
 * NAME=value strings, may be NULL) only LOCALDOMAIN and RES_OPTIONS. The relay hands it
 * connections over a socketpair made here: *relay_end is the relay's end (CLOEXEC), to be
 * passed into the sandbox. On failure (A3S_ERR_SETUP, with the mediator's own reason when
 * it gave one) nothing is left open or running and *m is A3S_MEDPROC_NONE. */
int a3s_medproc_start(const char *path, const a3s_grant *g, size_t n, const char *const *host_env,
                      int *relay_end, a3s_medproc *m, a3s_error *err);

/* Stop the mediator (close its stop pipe, wait a moment, then kill), reap it (wait status
 * in m->status), and return its denial records (malloc'd text, may be NULL). Safe on a
 * mediator that never started; leaves *m with nothing open. */
char *a3s_medproc_stop(a3s_medproc *m);

#endif
