/* Where the shipped policies of this installation are: found relative to the program or
 * library this code runs in, never at a path compiled in. */
#ifndef A3S_INSTDIR_H
#define A3S_INSTDIR_H

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

/* The search-path entry of the shipped policies built into the program (the policy
 * engine's, after the installed directory). */
const char *a3s_instdir_builtin(void);

#endif
