/* The shipped policies, built into the program (builtin.c): a virtual directory at the
 * end of every policy search path, so the shipped policies are there wherever the
 * program runs and whatever the workspace holds, and no file a command could rewrite
 * stands for them. An installed directory comes first (operators may read and diff it);
 * this is what is used where none may be trusted (one inside the workspace, none at all). */
#ifndef A3S_BUILTIN_H
#define A3S_BUILTIN_H

#include <stddef.h>

#include <lua.h>

/* The virtual directory's name in search paths and policy paths. */
#define A3S_BUILTIN_DIR "<builtin>"

typedef struct a3s_builtin_file {
    const char *name; /* relative to the policies directory: "baseline.lua", "lib/env.lua" */
    const unsigned char *data;
    size_t len;
    /* The chunk the build's Lua compiled from data (lua_dump, with debug information);
     * its source name is the bytes name_off..rest_off, which a load replaces. */
    const unsigned char *code;
    size_t code_len, name_off, rest_off;
} a3s_builtin_file;

/* The table the build generates (NULL name last), and the Lua release that compiled the
 * chunks (its lua_ident): only that release loads them. */
extern const a3s_builtin_file a3s_builtin_files[];
extern const char a3s_builtin_lua_ident[];

/* Is path inside the virtual directory ("<builtin>/...")? */
int a3s_builtin_is(const char *path);
/* The file at path ("<builtin>/NAME"), or NULL when there is none. */
const a3s_builtin_file *a3s_builtin_find(const char *path);
/* The shipped file whose text is exactly text[0..len) (wherever it was read from: an
 * installed copy is the same text), or NULL. */
const a3s_builtin_file *a3s_builtin_same_text(const char *text, size_t len);
/* Push the chunk compiled from text[0..len) by the build, named chunkname (as a text
 * load names it: error messages and line numbers are the same), and return 1, where the
 * text is a shipped file's and this Lua is the release that compiled it; else push
 * nothing and return 0 (the caller compiles the text). Never raises. */
int a3s_builtin_load(lua_State *L, const char *text, size_t len, const char *chunkname);

#endif
