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
