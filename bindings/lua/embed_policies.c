/* Build-time generator of the shipped policies built into the program (builtin.h):
 *   a3s-embed-policies OUT.c DIR NAME...
 * For each NAME (relative to DIR) it writes the source text and the chunk that this
 * build's Lua compiles from it (lua_dump, debug information kept), so an evaluation loads
 * the shipped policies without compiling them (1.5 ms of each run). The chunk's source
 * name lies at name_off..rest_off; a run splices in its own ("@path"). The Lua release
 * that compiled them is recorded: another release loads the text (lua_state.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#define COMPILED_NAME "=?"

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static int writer(lua_State *L, const void *p, size_t sz, void *ud)
{
    (void)L;
    buf *b = ud;
    if (b->n + sz > b->cap) {
        size_t cap = (b->n + sz) * 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q)
            return 1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, sz);
    b->n += sz;
    return 0;
}

static void put_bytes(FILE *out, const char *sym, const unsigned char *p, size_t n)
{
    fprintf(out, "static const unsigned char %s[] = {", sym);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s0x%02x,", i % 16 ? "" : "\n    ", p[i]);
    fprintf(out, "\n};\n");
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *p = NULL;
    size_t n = 0, cap = 0, r;
    do {
        if (n == cap) {
            unsigned char *q = realloc(p, cap = cap ? cap * 2 : 65536);
            if (!q) {
                free(p);
                fclose(f);
                return NULL;
            }
            p = q;
        }
        r = fread(p + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(p);
        return NULL;
    }
    *len = n;
    return p;
}

/* The main function's source name follows the header and the upvalue count: found by
 * looking for its encoding (size + 1 as one byte with the end mark, then the bytes). */
static long name_offset(const buf *b)
{
    size_t n = sizeof COMPILED_NAME - 1;
    for (size_t i = 4; i + 1 + n <= b->n && i < 64; i++)
        if (b->p[i] == (unsigned char)(0x80 | (n + 1)) && !memcmp(b->p + i + 1, COMPILED_NAME, n))
            return (long)i;
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: a3s-embed-policies OUT.c DIR NAME...\n");
        return 2;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *out = fopen(tmp, "w");
    if (!out)
        return perror(tmp), 1;
    fprintf(out, "/* Generated from the shipped policies by a3s-embed-policies. */\n"
                 "#include <stddef.h>\n\n#include \"builtin.h\"\n\n");
    fprintf(out, "const char a3s_builtin_lua_ident[] = \"");
    for (const char *c = lua_ident; *c; c++)
        fprintf(out, *c == '"' || *c == '\\' ? "\\%c" : (*c == '\n' ? "\\n" : "%c"), *c);
    fprintf(out, "\";\n\n");
    char *table = NULL;
    size_t tlen = 0;
    FILE *t = open_memstream(&table, &tlen);
    for (int i = 3; i < argc; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[2], argv[i]);
        size_t len = 0;
        unsigned char *text = slurp(path, &len);
        if (!text)
            return perror(path), 1;
        lua_State *L = luaL_newstate();
        buf b = {0};
        if (!L || luaL_loadbufferx(L, (const char *)text, len, COMPILED_NAME, "t") != LUA_OK) {
            fprintf(stderr, "%s: %s\n", path, L ? lua_tostring(L, -1) : "no Lua state");
            return 1;
        }
        if (lua_dump(L, writer, &b, 0) != 0) {
            fprintf(stderr, "%s: lua_dump failed\n", path);
            return 1;
        }
        long off = name_offset(&b);
        if (off < 0) {
            fprintf(stderr, "%s: the compiled chunk's source name was not found\n", path);
            return 1;
        }
        char sym[32];
        snprintf(sym, sizeof sym, "s%d", i);
        put_bytes(out, sym, text, len);
        snprintf(sym, sizeof sym, "c%d", i);
        put_bytes(out, sym, b.p, b.n);
        fprintf(t, "    {\"%s\", s%d, %zu, c%d, %zu, %ld, %ld},\n", argv[i], i, len, i, b.n, off,
                off + 1 + (long)(sizeof COMPILED_NAME - 1));
        lua_close(L);
        free(b.p);
        free(text);
    }
    fclose(t);
    fprintf(out, "\nconst a3s_builtin_file a3s_builtin_files[] = {\n%s    {NULL, NULL, 0, NULL, 0, "
                 "0, 0},\n};\n", table);
    free(table);
    if (fclose(out) != 0)
        return perror(tmp), 1;
    /* Replaced only when it changed: nothing is rebuilt for an unchanged policy set. */
    FILE *a = fopen(tmp, "rb"), *o = fopen(argv[1], "rb");
    int same = a && o;
    while (same) {
        int x = fgetc(a), y = fgetc(o);
        same = x == y;
        if (x == EOF || y == EOF)
            break;
    }
    if (a)
        fclose(a);
    if (o)
        fclose(o);
    if (same)
        return remove(tmp) == 0 ? 0 : 1;
    if (rename(tmp, argv[1]) != 0)
        return perror(argv[1]), 1;
    return 0;
}
