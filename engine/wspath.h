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
 * symbolic link on the way is followed only when the caller can neither write nor own
 * (chmod) the directory holding it; otherwise A3S_ERR_INVALID with a message naming the canonical path to pass
 * instead. *canonical (malloc'd) is the path actually walked. */
int a3s_wspath_open(const char *given, char **canonical, int *fd_out, a3s_error *err);

/* The same rule for another path the sandbox binds from the host (absolute), walking
 * each prefix as spelled: -1 with the first symbolic link on its way that lies in a
 * directory the caller can write or owns copied into link (size n); 0 when no prefix is a link
 * (it is spelled as it is); 1 when every link on it lies in a directory the caller
 * can neither write nor own. A missing prefix ends the walk (nothing below it can be bound). */
int a3s_wspath_bind_links(const char *path, char *link, size_t n);

/* Whether resolving the absolute `path` (every link followed, ".." taken physically, as
 * the kernel does) passes through a directory at or below the clean `root`, or through
 * root itself under another name (the same directory by device and inode: a bind mount
 * of it or of a directory holding it): 1 when it does, and when the walk cannot tell (a
 * component too long, a link loop, a directory it cannot search); 0 when not (the walk
 * ends at a missing component); -1 out of memory. */
int a3s_wspath_passes_within(const char *path, const char *root);

#endif
