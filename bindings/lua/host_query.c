/* What a policy may ask of the host: the a3s.host queries (exists, is_dir, realpath,
 * exposable, passes_through, aliases, mounts_below, glob_prefix) and ctx, the read-only facts (roots,
 * platform, environment, the PATH directories). On a neutral host (a3s_policy_ctx.neutral)
 * every query answers "absent" (no aliases, no entries) and ctx has no environment and no
 * PATH directories, so no fact of the real host can reach the plan. */
#include "runtime.h"
#include "aliases.h"
#include "facts.h"
#include "wspath.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#define DIR_MT "a3s.Dir"

typedef struct dirbox {
    DIR *d;
} dirbox;

/* ------------------------------------------------------------------ host queries */

/* a3s.host.exists(path) -> bool: something is at path (lstat; a symlink counts, even a
 * dangling one). false when it cannot be examined. [-1, +1, v] */
static int h_exists(lua_State *L)
{
    struct stat st;
    const char *p = a3s_lua_state_check_abs(L, 1);
    rt *r = a3s_rt_get(L);
    bool has = !r->ctx->neutral && lstat(p, &st) == 0;
    if (!r->ctx->neutral)
        a3s_facts_add(r->facts, A3S_FACT_EXISTS, p, strlen(p), NULL, 0, has);
    lua_pushboolean(L, has);
    return 1;
}

/* a3s.host.is_dir(path) -> bool: a real directory (lstat: not a symlink to one).
 * [-1, +1, v] */
static int h_is_dir(lua_State *L)
{
    struct stat st;
    const char *p = a3s_lua_state_check_abs(L, 1);
    rt *r = a3s_rt_get(L);
    bool has = !r->ctx->neutral && lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
    if (!r->ctx->neutral)
        a3s_facts_add(r->facts, A3S_FACT_IS_DIR, p, strlen(p), NULL, 0, has);
    lua_pushboolean(L, has);
    return 1;
}

static bool resolve_real(const char *p, char *buf, size_t n)
{
    (void)n; /* PATH_MAX, realpath's own bound */
    return realpath(p, buf) != NULL;
}

/* A path query answered by resolve (a path | nil), recorded as a fact of `kind`. */
static int path_query(lua_State *L, char kind, bool (*resolve)(const char *, char *, size_t))
{
    char buf[PATH_MAX];
    const char *p = a3s_lua_state_check_abs(L, 1);
    rt *r = a3s_rt_get(L);
    bool has = !r->ctx->neutral && resolve(p, buf, sizeof buf);
    if (!r->ctx->neutral)
        a3s_facts_add(r->facts, kind, p, strlen(p), buf, has ? strlen(buf) : 0, has);
    if (has)
        lua_pushstring(L, buf);
    else
        lua_pushnil(L);
    return 1;
}

/* a3s.host.realpath(path) -> canonical path | nil. [-1, +1, v] */
static int h_realpath(lua_State *L)
{
    return path_query(L, A3S_FACT_REALPATH, resolve_real);
}

/* a3s.host.exposable(path) -> canonical directory | nil: what a policy may re-expose.
 * Unlike realpath, a symbolic link is followed only where the caller can neither write
 * nor own the directory holding it: a link a command planted (in a workspace, say) must
 * never choose what a later run binds. [-1, +1, v] */
static int h_exposable(lua_State *L)
{
    return path_query(L, A3S_FACT_EXPOSABLE, a3s_facts_exposable);
}

/* a3s.host.passes_through(path, root) -> bool: whether resolving path (every symlink
 * followed, ".." taken physically) passes through root or a directory below it; a walk
 * ends at a missing component. For a policy to see that a path which starts and ends
 * elsewhere still depends on a directory a command can change. [-2, +1, v] */
static int h_passes_through(lua_State *L)
{
    const char *p = a3s_lua_state_check_abs(L, 1);
    const char *root = a3s_lua_state_check_abs(L, 2);
    rt *r = a3s_rt_get(L);
    bool has = false;
    if (!r->ctx->neutral) {
        int w = a3s_wspath_passes_within(p, root);
        if (w < 0)
            return luaL_error(L, "a3s.host.passes_through: out of memory");
        has = w == 1;
        size_t pl = strlen(p), rl = strlen(root);
        char *arg = malloc(pl + 1 + rl);
        if (!arg)
            return luaL_error(L, "a3s.host.passes_through: out of memory");
        memcpy(arg, p, pl + 1);
        memcpy(arg + pl + 1, root, rl);
        a3s_facts_add(r->facts, A3S_FACT_PASSES, arg, pl + 1 + rl, NULL, 0, has);
        free(arg);
    }
    lua_pushboolean(L, has);
    return 1;
}

/* A mount-table query (aliases.h) for path, recorded as a fact of `kind`: a sorted list,
 * {} on a neutral host. An unreadable mount table is an error: what is exposed under
 * another name cannot be known. [-1, +1, v] */
static int mount_query(lua_State *L, char kind,
                       int (*query)(const a3s_mount_table *, const char *, char **, size_t *))
{
    const char *p = a3s_lua_state_check_abs(L, 1);
    rt *r = a3s_rt_get(L);
    lua_newtable(L);
    if (r->ctx->neutral)
        return 1;
    char *out = NULL;
    size_t len = 0;
    /* One table for the whole evaluation: one consistent view, read once. */
    if (!r->mounts && !(r->mounts = a3s_aliases_table(NULL)))
        return luaL_error(L, "a3s.host: cannot read the mount table: %s", strerror(errno));
    if (query(r->mounts, p, &out, &len) < 0)
        return luaL_error(L, "a3s.host: out of memory");
    a3s_facts_add(r->facts, kind, p, strlen(p), out ? out : "", len, true);
    lua_Integer i = 0;
    for (size_t at = 0; at < len; at += strlen(out + at) + 1) {
        lua_pushstring(L, out + at);
        lua_rawseti(L, -2, ++i);
    }
    free(out);
    return 1;
}

/* a3s.host.aliases(path) -> sorted { path, ... }: the other paths where the mount table
 * shows path (an existing absolute path, canonical) or a part of it again (a bind mount
 * of it or of a directory holding it, or of a directory inside it); {} when none or when
 * path does not exist. [-1, +1, v] */
static int h_aliases(lua_State *L)
{
    return mount_query(L, A3S_FACT_ALIASES, a3s_aliases_in);
}

/* a3s.host.mounts_below(path) -> sorted { mount point, ... }: every mount point strictly
 * below path (a mount inside a workspace, which a command could move or reach through).
 * [-1, +1, v] */
static int h_mounts_below(lua_State *L)
{
    return mount_query(L, A3S_FACT_MOUNTS_BELOW, a3s_aliases_below);
}

/* __gc of the DIR box: idempotent. [-0, +0, -] */
static int dir_gc(lua_State *L)
{
    dirbox *b = luaL_checkudata(L, 1, DIR_MT);
    if (b->d)
        closedir(b->d);
    b->d = NULL;
    return 0;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* a3s.host.glob_prefix(dir, prefix) -> sorted { "dir/name", ... } for the entries of dir
 * whose name starts with prefix. A missing dir gives {}; an unreadable one is an error
 * (the list may name secrets to hide: guessing would fail open). [-2, +1, v] */
static int h_glob_prefix(lua_State *L)
{
    const char *dir = a3s_lua_state_check_rule_path(L, 1);
    size_t plen;
    const char *prefix = a3s_lua_state_check_str(L, 2, &plen);
    luaL_argcheck(L, !strchr(prefix, '/'), 2, "prefix must not contain '/'");
    lua_settop(L, 2);
    if (a3s_rt_get(L)->ctx->neutral) { /* a neutral host has no entries */
        lua_newtable(L);
        return 1;
    }
    /* The DIR* belongs to a userdata, so an error while listing cannot leak it. */
    dirbox *b = lua_newuserdatauv(L, sizeof *b, 0); /* 3 */
    b->d = NULL;
    luaL_setmetatable(L, DIR_MT);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            rt *r = a3s_rt_get(L);
            char *arg = r->facts ? malloc(strlen(dir) + 1 + plen + 1) : NULL;
            if (arg) {
                memcpy(arg, dir, strlen(dir) + 1);
                memcpy(arg + strlen(dir) + 1, prefix, plen + 1);
                a3s_facts_add(r->facts, A3S_FACT_GLOB, arg, strlen(dir) + 1 + plen, NULL, 0,
                              true);
                free(arg);
            } else {
                a3s_facts_break(r->facts);
            }
            lua_newtable(L);
            return 1;
        }
        return luaL_error(L, "glob_prefix: cannot open %s: %s", dir, strerror(errno));
    }
    if (!(b->d = fdopendir(fd))) {
        int e = errno;
        close(fd);
        return luaL_error(L, "glob_prefix: cannot open %s: %s", dir, strerror(e));
    }
    lua_newtable(L); /* 4: names */
    lua_Integer n = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(b->d);
        if (!de) {
            if (errno)
                return luaL_error(L, "glob_prefix: cannot list %s: %s", dir, strerror(errno));
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            strncmp(de->d_name, prefix, plen) != 0)
            continue;
        lua_pushstring(L, de->d_name);
        lua_rawseti(L, 4, ++n);
    }
    closedir(b->d);
    b->d = NULL;
    /* Sort pointers to the names (strings held by table 4 do not move). */
    const char **v = lua_newuserdatauv(L, (size_t)n * sizeof *v + 1, 0); /* 5 */
    for (lua_Integer i = 0; i < n; i++) {
        lua_rawgeti(L, 4, i + 1);
        v[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    qsort(v, (size_t)n, sizeof *v, cmp_cstr);
    rt *r = a3s_rt_get(L);
    if (r->facts) {
        /* As a3s_facts_glob answers: dir NUL prefix, then the sorted names NUL-ended. */
        size_t dl = strlen(dir), total = 0;
        for (lua_Integer i = 0; i < n; i++)
            total += strlen(v[i]) + 1;
        char *arg = malloc(dl + 1 + plen + 1), *ans = malloc(total + 1);
        if (arg && ans) {
            memcpy(arg, dir, dl + 1);
            memcpy(arg + dl + 1, prefix, plen + 1);
            for (lua_Integer i = 0, at = 0; i < n; i++) {
                size_t l = strlen(v[i]) + 1;
                memcpy(ans + at, v[i], l);
                at += (lua_Integer)l;
            }
            a3s_facts_add(r->facts, A3S_FACT_GLOB, arg, dl + 1 + plen, ans, total, true);
        } else {
            a3s_facts_break(r->facts);
        }
        free(arg);
        free(ans);
    }
    bool root = strcmp(dir, "/") == 0;
    lua_createtable(L, (int)n, 0); /* 6 */
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushfstring(L, "%s/%s", root ? "" : dir, v[i]);
        lua_rawseti(L, 6, i + 1);
    }
    return 1;
}

/* ------------------------------------------------------------------ ctx */

/* ctx: the read-only facts a policy may use. [-0, +1, m] */
void a3s_host_query_push_ctx(lua_State *L, const a3s_policy_ctx *c)
{
    luaL_checkstack(L, 8, NULL);
    lua_createtable(L, 0, 8);
    int t = lua_gettop(L);
    const char *roots[4] = {c->workspace, c->scratch, c->home, c->tmp};
    static const char *const names[4] = {"workspace", "scratch", "home", "tmp"};
    for (int i = 0; i < 4; i++) {
        lua_pushstring(L, roots[i]);
        lua_setfield(L, t, names[i]);
    }
    lua_pushstring(L, c->platform ? c->platform : "linux");
    lua_setfield(L, t, "platform");

    /* env: the host environment; the first entry for a name wins (like getenv). */
    lua_newtable(L);
    int env = lua_gettop(L);
    const char *path_value = NULL;
    for (size_t i = 0; !c->neutral && c->host_env && c->host_env[i]; i++) {
        const char *kv = c->host_env[i], *eq = strchr(kv, '=');
        if (!eq || eq == kv)
            continue;
        lua_pushlstring(L, kv, (size_t)(eq - kv));
        lua_pushvalue(L, -1);
        if (lua_rawget(L, env) != LUA_TNIL) {
            lua_pop(L, 2);
            continue;
        }
        lua_pop(L, 1);
        lua_pushstring(L, eq + 1);
        lua_rawset(L, env);
        if (!path_value && eq - kv == 4 && strncmp(kv, "PATH", 4) == 0)
            path_value = eq + 1;
    }
    a3s_lua_state_push_readonly(L, env, "ctx.env");
    lua_setfield(L, t, "env");
    lua_pop(L, 1);

    /* path_dirs: absolute PATH entries that are directories reached without a symbolic
     * link (a3s_facts_pathdir), canonical, deduplicated. */
    lua_newtable(L);
    int dirs = lua_gettop(L);
    lua_newtable(L);
    int seen = lua_gettop(L);
    lua_Integer n = 0;
    for (const char *s = path_value; s && *s;) {
        const char *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        char canon[PATH_MAX];
        if (len > 0 && len < PATH_MAX && s[0] == '/') {
            bool has = a3s_facts_pathdir(s, len, canon, sizeof canon);
            a3s_facts_add(a3s_rt_get(L)->facts, A3S_FACT_PATHDIR, s, len, canon,
                          has ? strlen(canon) : 0, has);
            if (has && lua_getfield(L, seen, canon) == LUA_TNIL) {
                lua_pushboolean(L, 1);
                lua_setfield(L, seen, canon);
                lua_pushstring(L, canon);
                lua_rawseti(L, dirs, ++n);
            }
            lua_settop(L, seen);
        }
        if (!colon)
            break;
        s = colon + 1;
    }
    lua_pop(L, 1);
    a3s_lua_state_push_readonly(L, dirs, "ctx.path_dirs");
    lua_setfield(L, t, "path_dirs");
    lua_pop(L, 1);
    a3s_lua_state_push_readonly(L, t, "ctx");
    lua_remove(L, t);
}

/* ------------------------------------------------------------------ registration */

void a3s_host_query_register(lua_State *L)
{
    /* The DIR box. */
    luaL_newmetatable(L, DIR_MT);
    lua_pushcfunction(L, dir_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
}

void a3s_host_query_push_lib(lua_State *L)
{
    static const luaL_Reg host[] = {
        {"exists", h_exists},
        {"is_dir", h_is_dir},
        {"realpath", h_realpath},
        {"exposable", h_exposable},
        {"passes_through", h_passes_through},
        {"aliases", h_aliases},
        {"mounts_below", h_mounts_below},
        {"glob_prefix", h_glob_prefix},
        {NULL, NULL},
    };
    luaL_newlib(L, host);
}
