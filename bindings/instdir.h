/* Where the shipped policies of this installation are: found relative to the program or
 * library this code runs in, never at a path compiled in. */
#ifndef A3S_INSTDIR_H
#define A3S_INSTDIR_H

#include "util.h"

/* The installation's policy directory (malloc'd, canonical), or NULL when there is none
 * that may be trusted: next to the running image, <dir>/share/a3s-sandbox/policies (the
 * build tree's layout), else <dir>/<relative path of the install layout>, where <dir>
 * holds the running executable (the CLI), the shared library or the Lua module. The
 * directory and every one above it must belong to root or to the image's owner and be
 * writable by no one else (sticky directories such as /tmp excepted): an install or
 * build tree below a directory others can write would otherwise read their files. */
char *a3s_instdir_policies(void);

/* The path of the program or library this code runs in (malloc'd, canonical), or NULL:
 * what a command must not be able to replace (compose.c refuses a workspace that holds
 * it). */
char *a3s_instdir_image(void);

/* Every path by which this program is reached or finds its data, for the workspace
 * guard (a3s_sandbox_guard_path): *image the canonical image (malloc'd; NULL when it
 * cannot be located), files the spellings it was run or loaded by (the CLI's argv[0],
 * or every PATH candidate up to the one found; a library's link-map name; either may
 * pass through links) and the image, dirs the policy directories looked for next to
 * it. 0, or -1 on ENOMEM. */
int a3s_instdir_guard_paths(char **image, a3s_strv *files, a3s_strv *dirs);

/* The search-path entry of the shipped policies built into the program (the policy
 * engine's, after the installed directory). */
const char *a3s_instdir_builtin(void);

#endif
