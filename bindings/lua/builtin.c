#include "builtin.h"

#include <string.h>

int a3s_builtin_is(const char *path)
{
    size_t n = sizeof A3S_BUILTIN_DIR - 1;
    return path && strncmp(path, A3S_BUILTIN_DIR, n) == 0 && path[n] == '/';
}

const a3s_builtin_file *a3s_builtin_find(const char *path)
{
    if (!a3s_builtin_is(path))
        return NULL;
    const char *rel = path + sizeof A3S_BUILTIN_DIR;
    for (const a3s_builtin_file *f = a3s_builtin_files; f->name; f++)
        if (strcmp(f->name, rel) == 0)
            return f;
    return NULL;
}

const a3s_builtin_file *a3s_builtin_same_text(const char *text, size_t len)
{
    for (const a3s_builtin_file *f = a3s_builtin_files; f->name; f++)
        if (f->len == len && (len == 0 || memcmp(f->data, text, len) == 0))
            return f;
    return NULL;
}

/* The compiled chunk in parts, its source name replaced: code up to the name, the name's
 * size (Lua's dump encoding: size + 1 in 7-bit groups, most significant first, the last
 * one marked 0x80), the name, the rest of the code. */
typedef struct splice {
    const char *part[4];
    size_t len[4];
    int next;
} splice;

static const char *splice_read(lua_State *L, void *ud, size_t *size)
{
    (void)L;
    splice *s = ud;
    while (s->next < 4 && s->len[s->next] == 0)
        s->next++;
    if (s->next == 4) {
        *size = 0;
        return NULL;
    }
    *size = s->len[s->next];
    return s->part[s->next++];
}

int a3s_builtin_load(lua_State *L, const char *text, size_t len, const char *chunkname)
{
    const a3s_builtin_file *f = a3s_builtin_same_text(text, len);
    if (!f || !f->code || f->rest_off > f->code_len || f->name_off >= f->rest_off ||
        strcmp(lua_ident, a3s_builtin_lua_ident) != 0)
        return 0;
    size_t n = strlen(chunkname) + 1;
    unsigned char enc[sizeof(size_t) * 8 / 7 + 1];
    size_t e = sizeof enc;
    do {
        enc[--e] = (unsigned char)(n & 0x7f);
        n >>= 7;
    } while (n != 0 && e > 0);
    enc[sizeof enc - 1] |= 0x80;
    splice s = {.part = {(const char *)f->code, (const char *)enc + e, chunkname,
                         (const char *)f->code + f->rest_off},
                .len = {f->name_off, sizeof enc - e, strlen(chunkname),
                        f->code_len - f->rest_off}};
    if (lua_load(L, splice_read, &s, chunkname, "b") != LUA_OK) {
        lua_pop(L, 1); /* not loadable here after all: the text is compiled */
        return 0;
    }
    return 1;
}
