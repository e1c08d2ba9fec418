/* The helper programs (the launcher, the relay, the mediator), embedded in the library at
 * build time and handed over as sealed memfds: what a run executes is never a file that
 * a command could have rewritten, wherever the library is installed. */
#ifndef A3S_HELPERS_H
#define A3S_HELPERS_H

#include "a3s_sandbox.h"

typedef enum a3s_helper {
    A3S_HELPER_LAUNCH,   /* a3s-sandbox-launch: first inside the sandbox (static) */
    A3S_HELPER_RELAY,    /* a3s-sandbox-relay: first inside a mediated sandbox (static) */
    A3S_HELPER_MEDIATOR, /* a3s-sandbox-mediator: on the host, for mediated runs */
    A3S_HELPER_COUNT
} a3s_helper;

/* A new memfd (CLOEXEC, at fd `min_fd` or above) holding the embedded image of h, sealed
 * against every change (write, shrink, grow, more seals) before it is returned, so
 * whoever holds it later can only execute or read what was embedded. -1 with err. */
int a3s_helpers_memfd(a3s_helper h, int min_fd, a3s_error *err);

/* The program's name (for messages and memfd names). */
const char *a3s_helpers_name(a3s_helper h);

#endif
