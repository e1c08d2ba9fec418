/* Root callers run the command under an unprivileged host id (see rootid.c). */
#ifndef A3S_ROOTID_H
#define A3S_ROOTID_H

#include <stdbool.h>
#include <stdint.h>

#include "a3s_sandbox.h"
#include "util.h"

typedef struct a3s_rootid {
    int sandbox_ns; /* for bwrap --userns: 0 -> host 0 (setup only), 1 -> the mapped id */
    int idmap_ns;   /* for idmapped mounts: on-disk 0 <-> the mapped id */
    uint32_t id;
} a3s_rootid;

#define A3S_ROOTID_INIT {-1, -1, 0}

/* Create both user namespaces (once per sandbox). Fails (A3S_ERR_SETUP) when this host
 * cannot; the caller then refuses unless host root was allowed. */
int a3s_rootid_open(a3s_rootid *r, uint32_t id, a3s_error *err);
void a3s_rootid_close(a3s_rootid *r);

/* A detached, idmapped, recursive clone of the directory open as dirfd (files owned by
 * host root appear as the mapped id's, and what the command creates is owned by host
 * root), nosuid and nodev, and read-only when asked. Returns the mount fd (CLOEXEC) or -1 with err: the message
 * says when the filesystem cannot do idmapped mounts. */
int a3s_rootid_clone(const a3s_rootid *r, int dirfd, const char *what, const char *path,
                     bool rdonly, a3s_error *err);

#endif
