/* The workspace root's original mode and POSIX ACLs, kept in the per-user state
 * directory (stale.h) next to the workspace's pin record, under its mutex: the first
 * holder of the workspace writes them, later ones never overwrite them; every holder
 * restores them when it leaves, and the last one - or, after a crash, the next acquire
 * or sweep - drops them. So neither a
 * killed CLI nor two overlapping runs can leave a workspace 0777 (a command may chmod
 * the root; what the first run saw is what the last one restores). */
#ifndef A3S_WSATTRS_H
#define A3S_WSATTRS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "a3s_sandbox.h"

/* Record the attributes of the workspace open as wsfd as "<key>.attrs" (with the
 * workspace path, for the sweep), replacing any record. */
int a3s_wsattrs_keep(int statefd, const char *key, int wsfd, const char *ws_path,
                     a3s_error *err);
/* Put back (narrowing only: see wsattrs.c) the recorded attributes, if any, on wsfd;
 * drop: and remove the record. ws_path (may be NULL): a record made for another path
 * (a reused inode) is removed and not applied. wsfd < 0: the
 * workspace is opened at the recorded path and must have the key's identity (else the
 * record stays). Returns whether a record was there. */
bool a3s_wsattrs_restore(int statefd, const char *key, int wsfd, bool drop,
                         const char *ws_path);

/* The workspace root's permissions as they were before a run: its mode and its POSIX
 * ACLs (access and default). A command may change them (a 0777 workspace, or a default
 * ACL that makes what host tools create there writable by others); they are restored
 * afterwards. */
typedef struct a3s_ws_attrs {
    bool known;
    mode_t mode;
    char *acl[2]; /* system.posix_acl_access, system.posix_acl_default; NULL: none */
    size_t acl_len[2];
} a3s_ws_attrs;

void a3s_ws_attrs_save(int wsfd, a3s_ws_attrs *a);
/* Best effort, then frees what save kept. */
void a3s_ws_attrs_restore(int wsfd, a3s_ws_attrs *a);

#endif
