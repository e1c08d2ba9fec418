/* The shipped policies, built into the program (builtin.c): a virtual directory at the
 * end of every policy search path, so the shipped policies are there wherever the
 * program runs and whatever the workspace holds, and no file a command could rewrite
 * stands for them. An installed directory comes first (operators may read and diff it);
 * this is what is used where none may be trusted (one inside the workspace, none at all). */
#ifndef A3S_BUILTIN_H
#define A3S_BUILTIN_H

#include <stddef.h>

/* The virtual directory's name in search paths and policy paths. */
#define A3S_BUILTIN_DIR "<builtin>"

typedef struct a3s_builtin_file {
    const char *name; /* relative to the policies directory: "baseline.lua", "lib/env.lua" */
    const unsigned char *data;
    size_t len;
} a3s_builtin_file;

/* The table the build generates (NULL name last). */
extern const a3s_builtin_file a3s_builtin_files[];

/* Is path inside the virtual directory ("<builtin>/...")? */
int a3s_builtin_is(const char *path);
/* The file at path ("<builtin>/NAME"), or NULL when there is none. */
const a3s_builtin_file *a3s_builtin_find(const char *path);

#endif
