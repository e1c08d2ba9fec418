/* Opening the workspace once, by file descriptor (see wspath.c). */
#ifndef A3S_WSPATH_H
#define A3S_WSPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "a3s_sandbox.h"
#include "util.h"

/* Walk `given` (relative to the current directory when not absolute) one component at a
 * time and open the directory it names (O_RDONLY|O_DIRECTORY|O_CLOEXEC, *fd_out). A
 * symbolic link on the way is followed only when the caller cannot write the directory
 * holding it; otherwise A3S_ERR_INVALID with a message naming the canonical path to pass
 * instead. *canonical (malloc'd) is the path actually walked. */
int a3s_wspath_open(const char *given, char **canonical, int *fd_out, a3s_error *err);

#endif

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
