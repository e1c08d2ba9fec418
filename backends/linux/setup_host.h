/* The setup step's host mounts: the plan's mounts outside the workspace (hidden roots,
 * tmpfs, read-only binds of toolchains, masks), made inside the sandbox with the mount
 * API instead of by bubblewrap (see setup_host.c and the "mnt-*" records of protocol.h).
 * Part of the in-sandbox launcher, never of the library. */
#ifndef A3S_SETUP_HOST_H
#define A3S_SETUP_HOST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct a3s_setup_host_op {
    const char *kind;       /* a "mnt-*" record kind (protocol.h) */
    const char *path;       /* absolute */
    unsigned long long arg; /* mnt-tmpfs, mnt-dir: the mode; mnt-bind: flags (protocol.h) */
} a3s_setup_host_op;

/* Whether a setup record kind is one of the host mounts. */
bool a3s_setup_host_is(const char *kind);

/* Make the n mounts in their order, every bind's source taken as the host shows it
 * before the first of them (as bubblewrap takes its sources from the old root). On
 * failure a message is on stderr and -1 is returned: the command must not run. */
int a3s_setup_host_apply(const a3s_setup_host_op *ops, size_t n);

#endif
