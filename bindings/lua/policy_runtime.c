/* The locked Lua state that evaluates a policy into a plan (SPEC §4).
 *
 * Shape (reference/anchors-style.md B.8, C.9-C.13):
 *   - lua_newstate with a limiting allocator: exact nsize-osize accounting (HAProxy's
 *     hlua_alloc), a hard cap that also covers the C plan the policy builds, and a sticky
 *     "memory limit hit" flag;
 *   - a count hook with an instruction budget and a wall-clock limit; once either is
 *     spent it fires before every instruction, so a pcall inside the policy cannot
 *     swallow it (Redis, Suricata). The clock catches loops of costly C operations
 *     (big string copies, compares); single C calls that could run long are bounded
 *     one by one (string.rep, table.*, pattern matching, finalizers, xpcall handlers);
 *   - only base (an allowlist: no dofile/loadfile/collectgarbage/print), string (no dump),
 *     table, math (no random), utf8; no io/os/package/debug/coroutine; text-only loads;
 *     `require` limited to the policy search path with a cache per evaluation scope;
 *   - every policy file runs in an environment of its own over one shared, unreachable
 *     table of globals, and the shared tables (string metatable, libraries, ctx, a3s)
 *     are read-only proxies, so a derived policy cannot change what its base sees;
 *   - all setup and evaluation run inside one lua_pcall'ed C function with a message
 *     handler (lua.c pmain/docall/msghandler), so nothing can panic;
 *   - builders append to a C plan owned by a userdata draft ("a3s.Plan", liolib style);
 *     after the pcall C steals the returned draft's plan and closes the state.
 * Every failure becomes A3S_ERR_POLICY "policy <path>: <message>". */
#include "policy_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "util.h"

#define RT_MEM_LIMIT ((size_t)64 << 20) /* Lua heap + C plan, bytes */
#define RT_INSN_BUDGET 50000000L        /* Lua VM instructions per evaluation */
#define RT_TIME_LIMIT_MS 5000ULL        /* wall clock per evaluation */
#define RT_HOOK_STEP 100                /* instructions between two budget checks */
#define RT_MAX_FILE ((size_t)1 << 20)   /* largest policy / module file */
#define RT_MODNAME_MAX 128
#define RT_PLANNAME_MAX 127 /* a3s_result.policy holds 127 characters */

#define PLAN_MT "a3s.Plan"
#define DIR_MT "a3s.Dir"
#define REG_ENV_MT "a3s.env_mt"       /* metatable of every chunk environment */
#define REG_BASE_LOAD "a3s.base_load" /* the base library's load, wrapped per scope */
#define REG_EXTENDING "a3s.extending" /* realpaths of policies being evaluated */

/* Per-evaluation context. Lua code reaches it through the allocator's ud pointer
 * (lua_getallocf), so it never sits in a table a policy could see. */
typedef struct rt {
    size_t used;       /* bytes held by the Lua heap */
    size_t plan_bytes; /* bytes charged for the C plans built (never refunded) */
    size_t limit;
    long insns;
    unsigned long long start_ms;
    bool budget_hit, mem_hit, closing;
    char stop_msg[384]; /* why the budget was declared spent, with the policy line */
    const a3s_policy_src *src;
    const a3s_policy_ctx *ctx;
    a3s_plan *result; /* stolen from the returned draft */
} rt;

typedef struct draft {
    a3s_plan *plan; /* NULL once freed or stolen */
} draft;

typedef struct dirbox {
    DIR *d;
} dirbox;

static rt *rt_get(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* ------------------------------------------------------------------ allocator, hook */

static void *rt_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    rt *r = ud;
    if (!ptr)
        osize = 0; /* osize then encodes the kind of object, not a size */
    if (nsize == 0) {
        free(ptr);
        r->used -= osize;
        return NULL;
    }
    if (nsize > osize) {
        size_t total = r->used + r->plan_bytes;
        if (total > r->limit || nsize - osize > r->limit - total) {
            r->mem_hit = true; /* sticky: a policy that hit the cap fails even if it caught it */
            return NULL;
        }
    }
    void *np = realloc(ptr, nsize);
    if (!np) {
        /* Lua assumes a shrinking realloc never fails: keep the old, larger block. */
        if (nsize <= osize)
            return ptr;
        return NULL;
    }
    r->used = r->used - osize + nsize;
    return np;
}

/* Charge C memory the policy makes us allocate (plans, rules) against the same cap. */
static void rt_charge(lua_State *L, size_t n)
{
    rt *r = rt_get(L);
    if (n > r->limit - r->plan_bytes || r->used + r->plan_bytes + n > r->limit) {
        r->mem_hit = true;
        luaL_error(L, "memory limit exceeded (%d MiB)", (int)(r->limit >> 20));
    }
    r->plan_bytes += n;
}

static void rt_hook(lua_State *L, lua_Debug *ar)
{
    rt *r = rt_get(L);
    if (r->closing) {
        lua_pushliteral(L, "policy code cannot run after evaluation");
        lua_error(L);
    }
    if (!r->budget_hit) {
        r->insns += RT_HOOK_STEP;
        bool insns = r->insns >= RT_INSN_BUDGET;
        if (!insns && a3s_now_ms() - r->start_ms <= RT_TIME_LIMIT_MS)
            return;
        r->budget_hit = true;
        char where[300] = "";
        if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
            snprintf(where, sizeof where, "%s:%d: ", ar->short_src, ar->currentline);
        if (insns)
            snprintf(r->stop_msg, sizeof r->stop_msg,
                     "%sinstruction budget exceeded (%ld instructions)", where, RT_INSN_BUDGET);
        else
            snprintf(r->stop_msg, sizeof r->stop_msg,
                     "%stime limit exceeded (evaluation ran longer than %llu ms)", where,
                     RT_TIME_LIMIT_MS);
        /* From now on fire before every instruction: a pcall in the policy may catch
         * this error, but the next instruction it runs raises it again. */
        lua_sethook(L, rt_hook, LUA_MASKCOUNT, 1);
    }
    lua_pushstring(L, r->stop_msg);
    lua_error(L);
}

/* ------------------------------------------------------------------ errors */

/* "file:line: " of the innermost Lua function with a known line at or above `level`. */
static void push_where(lua_State *L, int level)
{
    lua_Debug ar;
    for (; lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
            lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
            return;
        }
    }
    lua_pushliteral(L, "");
}

/* Message handler (lua.c msghandler): every error object becomes a readable string.
 * [-0, +1, m] */
static int rt_msgh(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TSTRING)
        return 1;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_tostring(L, 1);
        lua_settop(L, 1);
        return 1;
    }
    /* Level 1 is the function that raised (often `error` itself): find the Lua line. */
    push_where(L, 1);
    if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
        lua_concat(L, 2);
        return 1;
    }
    lua_settop(L, 2);
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    lua_concat(L, 2);
    return 1;
}

/* Copy a Lua message into buf, making control characters visible-safe for terminals. */
static void copy_message(char *buf, size_t n, const char *msg)
{
    size_t i = 0;
    for (; msg && msg[i] && i + 1 < n; i++) {
        unsigned char c = (unsigned char)msg[i];
        buf[i] = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : (char)c;
    }
    buf[i] = '\0';
}

/* ------------------------------------------------------------------ files */

/* Read a policy or module file: a regular file of at most RT_MAX_FILE bytes without NUL
 * bytes. 0 and *text (malloc'd, NUL-terminated); 1 when it does not exist; -1 and err. */
static int read_policy_file(const char *path, char **text, size_t *len, a3s_error *err)
{
    *text = NULL;
    *len = 0;
    /* O_NONBLOCK: opening a FIFO planted at the path must not hang the evaluation. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 1;
        return a3s_fail_errno(err, A3S_ERR_POLICY, errno, "policy %s: cannot open", path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_POLICY, e, "policy %s: cannot stat", path);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return a3s_fail(err, A3S_ERR_POLICY, "policy %s: not a regular file", path);
    }
    if (st.st_size < 0 || (size_t)st.st_size > RT_MAX_FILE) {
        close(fd);
        return a3s_fail(err, A3S_ERR_POLICY, "policy %s: larger than %zu bytes", path,
                        RT_MAX_FILE);
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        close(fd);
        return a3s_fail(err, A3S_ERR_INTERNAL, "policy %s: out of memory", path);
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = a3s_read_retry(fd, buf + got, size - got);
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return a3s_fail_errno(err, A3S_ERR_POLICY, e, "policy %s: cannot read", path);
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    /* A file that grew while we read it would otherwise be evaluated truncated. */
    char extra;
    ssize_t r = got == size ? a3s_read_retry(fd, &extra, 1) : 0;
    int e = errno;
    close(fd);
    if (r != 0) {
        free(buf);
        if (r < 0)
            return a3s_fail_errno(err, A3S_ERR_POLICY, e, "policy %s: cannot read", path);
        return a3s_fail(err, A3S_ERR_POLICY, "policy %s: changed while being read", path);
    }
    if (memchr(buf, '\0', got)) {
        free(buf);
        return a3s_fail(err, A3S_ERR_POLICY, "policy %s: contains a NUL byte", path);
    }
    buf[got] = '\0';
    *text = buf;
    *len = got;
    return 0;
}

static bool is_alnum_(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* [A-Za-z0-9_]+(\.[A-Za-z0-9_]+)* */
static bool module_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > RT_MODNAME_MAX || strlen(s) != len)
        return false;
    bool want = true; /* a component character is required next */
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (want)
                return false;
            want = true;
        } else if (is_alnum_(s[i])) {
            want = false;
        } else {
            return false;
        }
    }
    return !want;
}

/* [A-Za-z0-9_.-]{1,127} (the plan's name rule) */
static bool plan_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > RT_PLANNAME_MAX || strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum_(s[i]) && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

/* ------------------------------------------------------------------ environments */

/* A fresh environment for one chunk: its own globals, falling back to the shared base
 * table, with `require` and `load` bound to the evaluation scope whose require cache is
 * at cache_idx. [-0, +1, m] */
static int l_require(lua_State *L);
static int l_load(lua_State *L);

static void push_env(lua_State *L, int cache_idx)
{
    cache_idx = lua_absindex(L, cache_idx);
    lua_createtable(L, 0, 4);
    lua_pushvalue(L, -1);
    lua_setfield(L, -2, "_G");
    lua_pushvalue(L, cache_idx);
    lua_pushcclosure(L, l_require, 1);
    lua_setfield(L, -2, "require");
    lua_pushvalue(L, cache_idx);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_BASE_LOAD);
    lua_pushcclosure(L, l_load, 2);
    lua_setfield(L, -2, "load");
    lua_getfield(L, LUA_REGISTRYINDEX, REG_ENV_MT);
    lua_setmetatable(L, -2);
}

/* Give the function at fn_idx (a main chunk: its first upvalue is _ENV) a fresh
 * environment of the scope at cache_idx. [-0, +0, m] */
static void set_chunk_env(lua_State *L, int fn_idx, int cache_idx)
{
    fn_idx = lua_absindex(L, fn_idx);
    push_env(L, cache_idx);
    if (!lua_setupvalue(L, fn_idx, 1))
        lua_pop(L, 1); /* a chunk without upvalues touches no globals */
}

/* Compile text as a chunk named "@path" in text mode and push it. Frees text. [-0, +1, e] */
static void load_text(lua_State *L, char *text, size_t len, const char *path)
{
    char chunkname[PATH_MAX + 2];
    snprintf(chunkname, sizeof chunkname, "@%s", path);
    /* luaL_loadbufferx reports errors by status (it does not longjmp), so text is
     * always freed before anything below can raise. */
    int st = luaL_loadbufferx(L, text, len, chunkname, "t");
    free(text);
    if (st != LUA_OK)
        lua_error(L);
}

/* Find module `name` (dots -> '/') + ".lua" in the search path, load it in text mode
 * and push the chunk; the resolved path is written to path_out. [-0, +1, e] */
static void load_module(lua_State *L, const char *name, char *path_out, size_t path_n)
{
    rt *r = rt_get(L);
    char rel[RT_MODNAME_MAX + 1];
    snprintf(rel, sizeof rel, "%s", name);
    for (char *c = rel; *c; c++)
        if (*c == '.')
            *c = '/';
    for (size_t i = 0; r->ctx->search_path && r->ctx->search_path[i]; i++) {
        int n = snprintf(path_out, path_n, "%s/%s.lua", r->ctx->search_path[i], rel);
        if (n < 0 || (size_t)n >= path_n)
            continue;
        a3s_error e;
        char *text;
        size_t len;
        int rc = read_policy_file(path_out, &text, &len, &e);
        if (rc < 0)
            luaL_error(L, "%s", e.msg);
        if (rc == 0) {
            load_text(L, text, len, path_out);
            return;
        }
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_where(L, 1); /* the Lua line that asked (require / a3s.extend is level 0) */
    luaL_addvalue(&b);
    luaL_addstring(&b, "module '");
    luaL_addstring(&b, name);
    luaL_addstring(&b, "' not found in the policy search path (");
    size_t i = 0;
    for (; r->ctx->search_path && r->ctx->search_path[i]; i++) {
        if (i)
            luaL_addstring(&b, ", ");
        luaL_addstring(&b, r->ctx->search_path[i]);
    }
    luaL_addstring(&b, i ? ")" : "empty)");
    luaL_pushresult(&b);
    lua_error(L);
}

static const char loading_mark = 0; /* cache value while a module is being loaded */

/* require(name): a module from the policy search path, cached per evaluation scope.
 * upvalue 1: the scope's cache. [-1, +1, e] */
static int l_require(lua_State *L)
{
    size_t len;
    luaL_checktype(L, 1, LUA_TSTRING);
    const char *name = lua_tolstring(L, 1, &len);
    if (!module_name_ok(name, len))
        return luaL_error(L, "require: invalid module name '%s' (expected names like "
                             "\"lib.credentials\": [A-Za-z0-9_] components joined by '.')",
                          name);
    lua_settop(L, 1);
    int cache = lua_upvalueindex(1);
    lua_getfield(L, cache, name); /* stack: name, cached */
    if (lua_touserdata(L, -1) == &loading_mark)
        return luaL_error(L, "require: module '%s' requires itself (cycle)", name);
    if (!lua_isnil(L, -1))
        return 1;
    lua_pop(L, 1);
    char path[PATH_MAX];
    load_module(L, name, path, sizeof path); /* stack: name, chunk */
    set_chunk_env(L, -1, cache);
    lua_pushlightuserdata(L, (void *)&loading_mark);
    lua_setfield(L, cache, name);
    lua_pushvalue(L, 1);
    lua_pushstring(L, path);
    if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
        /* Forget the mark (a later require must not report a cycle), then re-raise. */
        lua_pushnil(L);
        lua_setfield(L, cache, name);
        return lua_error(L);
    }
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, cache, name);
    return 1;
}

/* load(chunk [, chunkname [, mode [, env]]]) in text mode only. Without env the chunk
 * gets a fresh environment of the caller's scope, never the shared globals. A
 * chunkname cannot claim to be a file ('@'): provenance always names a real file.
 * upvalues: 1 the scope's cache, 2 the base library's load. [-(0|4), +(1|2), e] */
static int l_load(lua_State *L)
{
    int nargs = lua_gettop(L);
    if (!lua_isnoneornil(L, 3)) {
        const char *mode = luaL_checkstring(L, 3);
        if (strcmp(mode, "t") != 0)
            return luaL_argerror(L, 3, "only text chunks (mode \"t\") may be loaded");
    }
    lua_settop(L, 4);
    lua_pushvalue(L, lua_upvalueindex(2)); /* 5: base load */
    lua_pushvalue(L, 1);
    if (lua_isnil(L, 2)) {
        lua_pushnil(L);
    } else {
        lua_pushfstring(L, "=%s", luaL_checkstring(L, 2));
    }
    lua_pushliteral(L, "t");
    if (nargs >= 4)
        lua_pushvalue(L, 4);
    else
        push_env(L, lua_upvalueindex(1));
    lua_call(L, 4, LUA_MULTRET);
    return lua_gettop(L) - 4;
}

/* ------------------------------------------------------------------ read-only proxies */

/* [-2, +0, e] */
static int ro_newindex(lua_State *L)
{
    const char *what = lua_tostring(L, lua_upvalueindex(1));
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
    return luaL_error(L, "%s is read-only (attempt to set '%s')", what, key);
}

/* [-0, +1, -] */
static int ro_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, lua_upvalueindex(1)));
    return 1;
}

/* next over the real table, without ever handing the real table out. [-2, +(1|2), e] */
static int ro_next(lua_State *L)
{
    lua_settop(L, 2);
    if (lua_next(L, lua_upvalueindex(1)))
        return 2;
    lua_pushnil(L);
    return 1;
}

/* [-0, +3, m] */
static int ro_pairs(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushcclosure(L, ro_next, 1);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

/* Push a read-only proxy for the table at idx: a userdata (rawset cannot touch it)
 * whose locked metatable reads through to the table. [-0, +1, m] */
static void push_readonly(lua_State *L, int idx, const char *what)
{
    idx = lua_absindex(L, idx);
    luaL_checkstack(L, 4, NULL);
    lua_newuserdatauv(L, 0, 0);
    lua_createtable(L, 0, 7);
    lua_pushvalue(L, idx);
    lua_setfield(L, -2, "__index");
    lua_pushstring(L, what);
    lua_pushcclosure(L, ro_newindex, 1);
    lua_setfield(L, -2, "__newindex");
    lua_pushvalue(L, idx);
    lua_pushcclosure(L, ro_len, 1);
    lua_setfield(L, -2, "__len");
    lua_pushvalue(L, idx);
    lua_pushcclosure(L, ro_pairs, 1);
    lua_setfield(L, -2, "__pairs");
    lua_pushstring(L, what);
    lua_setfield(L, -2, "__name");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
}

/* ------------------------------------------------------------------ argument checks */

/* Argument `arg` as a string without NUL bytes. [-0, +0, v] */
static const char *check_str(lua_State *L, int arg, size_t *lenp)
{
    size_t len;
    luaL_checktype(L, arg, LUA_TSTRING);
    const char *s = lua_tolstring(L, arg, &len);
    if (strlen(s) != len)
        luaL_argerror(L, arg, "string contains a NUL byte");
    if (lenp)
        *lenp = len;
    return s;
}

/* Argument `arg` as an absolute path for a host query. [-0, +0, v] */
static const char *check_abs(lua_State *L, int arg)
{
    size_t len;
    const char *p = check_str(L, arg, &len);
    if (p[0] != '/')
        luaL_argerror(L, arg, lua_pushfstring(L, "absolute path expected, got '%s'", p));
    if (len >= PATH_MAX)
        luaL_argerror(L, arg, "path too long");
    return p;
}

/* Argument `arg` as a clean absolute path for a rule. [-0, +0, v] */
static const char *check_rule_path(lua_State *L, int arg)
{
    const char *p = check_abs(L, arg);
    if (!a3s_path_is_clean(p))
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "path '%s' is not clean (no '.', '..', '//' or "
                                         "trailing '/')",
                                      p));
    return p;
}

/* Strict sequence of strings at arg: keys exactly 1..n, every value a non-empty string
 * without NUL. Returns n. [-0, +0, v] */
static lua_Integer check_string_list(lua_State *L, int arg, const char *fname)
{
    arg = lua_absindex(L, arg);
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_Integer n = (lua_Integer)lua_rawlen(L, arg), count = 0;
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_Integer k = 0;
        if (!lua_isinteger(L, -2) || (k = lua_tointeger(L, -2)) < 1 || k > n)
            luaL_error(L, "%s: expected a list of strings (found a non-list key)", fname);
        size_t len;
        if (lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: list entry %d must be a string, got %s", fname, (int)k,
                       luaL_typename(L, -1));
        const char *s = lua_tolstring(L, -1, &len);
        if (len == 0 || strlen(s) != len)
            luaL_error(L, "%s: list entry %d is empty or contains a NUL byte", fname, (int)k);
        count++;
        lua_pop(L, 1);
    }
    if (count != n)
        luaL_error(L, "%s: expected a list of strings without holes", fname);
    return n;
}

/* Where the current builder call comes from: the innermost Lua function loaded from a
 * file (chunk name "@path"), so chunks from `load` are attributed to their caller. */
static void caller_prov(lua_State *L, const char **file, int *line)
{
    lua_Debug ar;
    for (int level = 1; lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "Sl", &ar) && ar.source && ar.source[0] == '@' &&
            ar.currentline > 0) {
            *file = ar.source + 1;
            *line = ar.currentline;
            return;
        }
    }
    *file = rt_get(L)->src->path;
    *line = 0;
}

/* The open plan of the draft at index 1. [-0, +0, v] */
static a3s_plan *check_plan(lua_State *L)
{
    draft *d = luaL_checkudata(L, 1, PLAN_MT);
    if (!d->plan)
        luaL_error(L, "this plan is no longer open");
    return d->plan;
}

/* Raise a builder failure (plan.c's message). [-0, +0, v] */
static int raise_plan_error(lua_State *L, const a3s_error *e)
{
    return luaL_error(L, "%s", e->msg);
}

/* Replace an owned provenance with the caller's. [-0, +0, v] */
static void set_prov(lua_State *L, a3s_prov *pv)
{
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    rt_charge(L, strlen(file) + 1);
    char *f = strdup(file);
    if (!f)
        luaL_error(L, "out of memory");
    free(pv->file);
    pv->file = f;
    pv->line = line;
}

/* ------------------------------------------------------------------ plan methods */

typedef struct fs_opts {
    bool optional, discovered, broaden;
} fs_opts;

/* Strict options table { optional = bool, discovered = bool } at arg. [-0, +0, v] */
static void check_fs_opts(lua_State *L, int arg, const char *fname, fs_opts *o)
{
    o->optional = o->discovered = o->broaden = false;
    if (lua_isnoneornil(L, arg))
        return;
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_error(L, "%s: option names must be strings", fname);
        const char *k = lua_tostring(L, -2);
        bool *dst = strcmp(k, "optional") == 0     ? &o->optional
                    : strcmp(k, "discovered") == 0 ? &o->discovered
                    : strcmp(k, "broaden") == 0    ? &o->broaden
                                                   : NULL;
        if (!dst)
            luaL_error(L, "%s: unknown option '%s' (known: optional, discovered, broaden)",
                       fname, k);
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            luaL_error(L, "%s: option '%s' must be a boolean, got %s", fname, k,
                       luaL_typename(L, -1));
        *dst = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
}

/* plan:<kind>(path [, opts]) -> plan. [-(2|3), +1, v] */
static int fs_method(lua_State *L, enum a3s_fs_kind kind, const char *fname)
{
    a3s_plan *p = check_plan(L);
    const char *path = check_rule_path(L, 2);
    fs_opts o;
    check_fs_opts(L, 3, fname, &o);
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    rt_charge(L, sizeof(a3s_fs_rule) + strlen(path) + strlen(file) + 2);
    a3s_error e;
    if (o.broaden && kind != A3S_FS_RW)
        luaL_error(L, "%s: option 'broaden' only applies to writable roots", fname);
    /* A writable root is a declaration, never a host fact: the label must not dress up a
     * widening as one (in plan/explain output, or to a reviewer). */
    if (o.discovered && kind == A3S_FS_RW)
        luaL_error(L, "%s: option 'discovered' does not apply to writable roots", fname);
    if (a3s_plan_add_fs(p, kind, path, o.optional, o.discovered, file, line, &e) < 0)
        return raise_plan_error(L, &e);
    p->fs[p->nfs - 1].broaden = o.broaden;
    lua_settop(L, 1);
    return 1;
}

static int m_hide(lua_State *L) { return fs_method(L, A3S_FS_HIDE, "hide"); }
static int m_tmpfs(lua_State *L) { return fs_method(L, A3S_FS_TMPFS, "tmpfs"); }
static int m_read_only(lua_State *L) { return fs_method(L, A3S_FS_RO, "read_only"); }
static int m_writable(lua_State *L) { return fs_method(L, A3S_FS_RW, "writable"); }
static int m_protect(lua_State *L) { return fs_method(L, A3S_FS_PROTECT, "protect"); }
static int m_mask(lua_State *L) { return fs_method(L, A3S_FS_MASK, "mask"); }

/* plan:rule_kind(path) -> "hide" | "tmpfs" | ... | nil: the kind of the last rule
 * declared for exactly this path. [-2, +1, v] */
static int m_rule_kind(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    const char *path = check_rule_path(L, 2);
    for (size_t i = p->nfs; i > 0; i--) {
        if (strcmp(p->fs[i - 1].path, path) == 0) {
            lua_pushstring(L, a3s_fs_kind_name(p->fs[i - 1].kind));
            return 1;
        }
    }
    lua_pushnil(L);
    return 1;
}

/* plan:replace(path, kind [, opts]) -> plan: every rule already declared for exactly
 * `path` (typically by the base policy) becomes a rule of `kind` with the given options,
 * attributed to the caller; its place in the declaration order is kept. Replacing a
 * path that has no rule is an error, so a typo cannot silently add one. [-(3|4), +1, v] */
static int m_replace(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    const char *path = check_rule_path(L, 2);
    const char *kname = luaL_checkstring(L, 3);
    int kind = -1;
    for (int k = 0; k < A3S_FS_KIND_COUNT; k++)
        if (strcmp(kname, a3s_fs_kind_name((enum a3s_fs_kind)k)) == 0)
            kind = k;
    if (kind < 0)
        return luaL_error(L, "replace: unknown kind '%s' (known: hide, tmpfs, read_only, "
                             "writable, protect, mask)", kname);
    fs_opts o;
    check_fs_opts(L, 4, "replace", &o);
    if (o.broaden && kind != A3S_FS_RW)
        luaL_error(L, "replace: option 'broaden' only applies to writable roots");
    if (o.discovered && kind == A3S_FS_RW)
        luaL_error(L, "replace: option 'discovered' does not apply to writable roots");
    size_t n = 0;
    for (size_t i = 0; i < p->nfs; i++) {
        a3s_fs_rule *r = &p->fs[i];
        if (strcmp(r->path, path) != 0)
            continue;
        set_prov(L, &r->prov);
        r->kind = (enum a3s_fs_kind)kind;
        r->optional = o.optional;
        r->discovered = o.discovered;
        r->broaden = o.broaden;
        n++;
    }
    if (n == 0)
        return luaL_error(L, "replace: no rule declared for %s", path);
    lua_settop(L, 1);
    return 1;
}

/* Append every string of the list at arg to l. [-0, +0, v] */
static void add_names(lua_State *L, int arg, a3s_name_list *l, const char *fname)
{
    lua_Integer n = check_string_list(L, arg, fname);
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, arg, i);
        const char *s = lua_tostring(L, -1);
        rt_charge(L, sizeof(a3s_name) + strlen(s) + strlen(file) + 2);
        a3s_error e;
        if (a3s_plan_add_name(l, s, file, line, &e) < 0)
            raise_plan_error(L, &e);
        lua_pop(L, 1);
    }
}

/* plan:<list>{ names... } -> plan. [-2, +1, v] */
#define NAME_LIST_METHOD(fn, member, label)                                              \
    static int fn(lua_State *L)                                                          \
    {                                                                                    \
        a3s_plan *p = check_plan(L);                                                     \
        lua_settop(L, 2);                                                                \
        add_names(L, 2, &p->member, label);                                              \
        lua_settop(L, 1);                                                                \
        return 1;                                                                        \
    }

NAME_LIST_METHOD(m_scan_skip, scan_skip, "scan_skip")
NAME_LIST_METHOD(m_env_keep, env.keep, "env_keep")
NAME_LIST_METHOD(m_env_keep_prefix, env.keep_prefix, "env_keep_prefix")
NAME_LIST_METHOD(m_env_strip, env.strip, "env_strip")
NAME_LIST_METHOD(m_env_strip_prefix, env.strip_prefix, "env_strip_prefix")

/* plan:protect_names{ dirs = {...}, files = {...} } -> plan. [-2, +1, v] */
static int m_protect_names(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (!k || (strcmp(k, "dirs") != 0 && strcmp(k, "files") != 0))
            luaL_error(L, "protect_names: unknown key '%s' (known: dirs, files)",
                       k ? k : luaL_typename(L, -2));
        check_string_list(L, -1, k);
        lua_pop(L, 1);
    }
    lua_getfield(L, 2, "dirs"); /* 3 */
    if (!lua_isnil(L, 3))
        add_names(L, 3, &p->protect_dirs, "protect_names.dirs");
    lua_getfield(L, 2, "files"); /* 4 */
    if (!lua_isnil(L, 4))
        add_names(L, 4, &p->protect_files, "protect_names.files");
    lua_settop(L, 1);
    return 1;
}

/* plan:secret_prefix(prefix) -> plan. [-2, +1, v] */
static int m_secret_prefix(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    size_t len;
    const char *s = check_str(L, 2, &len);
    luaL_argcheck(L, len > 0, 2, "empty prefix");
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    rt_charge(L, sizeof(a3s_name) + len + strlen(file) + 2);
    a3s_error e;
    if (a3s_plan_add_name(&p->secret_prefixes, s, file, line, &e) < 0)
        return raise_plan_error(L, &e);
    lua_settop(L, 1);
    return 1;
}

/* plan:env_set(name, value [, { discovered = bool }]) -> plan. [-(3|4), +1, v] */
static int m_env_set(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    size_t nl, vl;
    const char *name = check_str(L, 2, &nl);
    const char *value = check_str(L, 3, &vl);
    luaL_argcheck(L, nl > 0, 2, "empty name");
    fs_opts o;
    check_fs_opts(L, 4, "env_set", &o);
    if (o.optional)
        luaL_error(L, "env_set: option 'optional' does not apply to environment values");
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    rt_charge(L, sizeof(a3s_kv) + nl + vl + strlen(file) + 3);
    a3s_error e;
    if (a3s_plan_env_set(p, name, value, file, line, &e) < 0)
        return raise_plan_error(L, &e);
    p->env.set[p->env.nset - 1].discovered = o.discovered;
    lua_settop(L, 1);
    return 1;
}

/* plan:network("none") -> plan: the only mode for now. [-2, +1, v] */
static int m_network(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    const char *mode = check_str(L, 2, NULL);
    if (strcmp(mode, "none") != 0)
        return luaL_argerror(L, 2,
                             lua_pushfstring(L, "unknown network mode '%s' (only \"none\")",
                                             mode));
    set_prov(L, &p->network_prov);
    p->network = A3S_NET_NONE;
    lua_settop(L, 1);
    return 1;
}

/* plan:allow_host_root(true|false) -> plan: root callers whose workspace cannot be
 * idmapped run the command as host uid 0 instead of being refused. [-2, +1, v] */
static int m_allow_host_root(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    luaL_checktype(L, 2, LUA_TBOOLEAN);
    set_prov(L, &p->host_root_prov);
    p->allow_host_root = lua_toboolean(L, 2);
    lua_settop(L, 1);
    return 1;
}

/* Errno number for the name at arg (default dflt). [-0, +0, v] */
static int check_errno(lua_State *L, int arg, const char *dflt, const char *fname)
{
    const char *name = lua_isnoneornil(L, arg) ? dflt : check_str(L, arg, NULL);
    int e = a3s_errno_from_name(name);
    if (e <= 0)
        luaL_error(L, "%s: unknown errno name '%s'", fname, name);
    return e;
}

/* plan:seccomp_deny({ syscalls... } [, errno_name = "EPERM"]) -> plan. [-(2|3), +1, v] */
static int m_seccomp_deny(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    lua_Integer n = check_string_list(L, 2, "seccomp_deny");
    int errnum = check_errno(L, 3, "EPERM", "seccomp_deny");
    lua_settop(L, 2);
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, 2, i);
        const char *sc = lua_tostring(L, -1);
        rt_charge(L, sizeof(a3s_sc_rule) + strlen(sc) + strlen(file) + 2);
        a3s_error e;
        if (a3s_plan_seccomp_deny(p, sc, errnum, file, line, &e) < 0)
            return raise_plan_error(L, &e);
        lua_pop(L, 1);
    }
    lua_settop(L, 1);
    return 1;
}

static const struct {
    const char *name;
    int family;
} families[] = {
    {"AF_UNIX", AF_UNIX},
    {"AF_INET", AF_INET},
    {"AF_INET6", AF_INET6},
};

/* plan:seccomp{ socket_families = {...}, socketpair_unix = bool, deny_clone_ns = bool,
 *               deny_tty_inject = bool, socket_errno = "EAFNOSUPPORT" } -> plan.
 * Checked completely before anything changes; socket_families replaces the list.
 * [-2, +1, v] */
static int m_seccomp(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    static const char *const bools[] = {"socketpair_unix", "deny_clone_ns", "deny_tty_inject"};
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        bool known = false;
        for (size_t i = 0; k && i < sizeof bools / sizeof bools[0]; i++) {
            if (strcmp(k, bools[i]) == 0) {
                known = true;
                if (lua_type(L, -1) != LUA_TBOOLEAN)
                    luaL_error(L, "seccomp: '%s' must be a boolean, got %s", k,
                               luaL_typename(L, -1));
            }
        }
        if (k && strcmp(k, "socket_errno") == 0) {
            known = true;
            if (lua_type(L, -1) != LUA_TSTRING)
                luaL_error(L, "seccomp: 'socket_errno' must be an errno name");
        } else if (k && strcmp(k, "socket_families") == 0) {
            known = true;
            lua_Integer n = check_string_list(L, -1, "seccomp.socket_families");
            for (lua_Integer i = 1; i <= n; i++) {
                lua_rawgeti(L, -1, i);
                const char *f = lua_tostring(L, -1);
                bool ok = false;
                for (size_t j = 0; j < sizeof families / sizeof families[0]; j++)
                    ok = ok || strcmp(f, families[j].name) == 0;
                if (!ok)
                    luaL_error(L, "seccomp: unknown socket family '%s' (known: AF_UNIX, "
                                  "AF_INET, AF_INET6)",
                               f);
                lua_pop(L, 1);
            }
        }
        if (!known)
            luaL_error(L,
                       "seccomp: unknown key '%s' (known: socket_families, socketpair_unix, "
                       "deny_clone_ns, deny_tty_inject, socket_errno)",
                       k ? k : luaL_typename(L, -2));
        lua_pop(L, 1);
    }
    int sock_errno = 0;
    if (lua_getfield(L, 2, "socket_errno") != LUA_TNIL) /* 3 */
        sock_errno = check_errno(L, 3, NULL, "seccomp");
    set_prov(L, &p->seccomp.prov);
    /* Everything is checked: apply. */
    bool *dst[] = {&p->seccomp.socketpair_unix, &p->seccomp.deny_clone_ns,
                   &p->seccomp.deny_tty_inject};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++) {
        if (lua_getfield(L, 2, bools[i]) == LUA_TBOOLEAN)
            *dst[i] = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    if (sock_errno)
        p->seccomp.socket_errnum = sock_errno;
    if (lua_getfield(L, 2, "socket_families") == LUA_TTABLE) {
        int t = lua_gettop(L);
        p->seccomp.nsocket_allow = 0;
        for (lua_Integer i = 1; lua_rawgeti(L, t, i) == LUA_TSTRING; i++) {
            const char *f = lua_tostring(L, -1);
            for (size_t j = 0; j < sizeof families / sizeof families[0]; j++) {
                if (strcmp(f, families[j].name) != 0)
                    continue;
                rt_charge(L, sizeof(int));
                a3s_error e;
                if (a3s_plan_seccomp_allow_family(p, families[j].family, &e) < 0)
                    return raise_plan_error(L, &e);
            }
            lua_pop(L, 1);
        }
    }
    lua_settop(L, 1);
    return 1;
}

/* plan:limits{ timeout_ms=, output_bytes=, nofile=, core_bytes=, scan_depth=,
 *              scan_entries=, processes=, memory_bytes=, cpu_millicores=,
 *              file_size_bytes= } -> plan: integers; ranges are plan validation's job,
 * except that a quota of 0 or less is refused here (0 would read as "no quota").
 * [-2, +1, v] */
#define NLIMITS 10
static int m_limits(lua_State *L)
{
    a3s_plan *p = check_plan(L);
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_settop(L, 2);
    static const char *const keys[NLIMITS] = {
        "timeout_ms", "core_bytes",   "output_bytes",   "nofile",         "scan_depth",
        "scan_entries", "processes", "memory_bytes", "cpu_millicores", "file_size_bytes"};
    int64_t *dst[NLIMITS] = {&p->limits.timeout_ms,     &p->limits.core_bytes,
                             &p->limits.output_bytes,   &p->limits.nofile,
                             &p->limits.scan_depth,     &p->limits.scan_entries,
                             &p->limits.processes,      &p->limits.memory_bytes,
                             &p->limits.cpu_millicores, &p->limits.file_size_bytes};
    int64_t val[NLIMITS];
    bool set[NLIMITS] = {false};
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        size_t i = 0;
        while (k && i < NLIMITS && strcmp(k, keys[i]) != 0)
            i++;
        if (!k || i == NLIMITS)
            luaL_error(L,
                       "limits: unknown key '%s' (known: timeout_ms, output_bytes, nofile, "
                       "core_bytes, scan_depth, scan_entries, processes, memory_bytes, "
                       "cpu_millicores, file_size_bytes)",
                       k ? k : luaL_typename(L, -2));
        int isint = 0;
        lua_Integer v = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &isint) : 0;
        if (!isint)
            luaL_error(L, "limits: '%s' must be an integer, got %s", k,
                       lua_type(L, -1) == LUA_TNUMBER ? "a fraction" : luaL_typename(L, -1));
        if (i >= 6 && v <= 0)
            luaL_error(L, "limits: quota '%s' must be greater than zero, got %I", k, v);
        val[i] = (int64_t)v;
        set[i] = true;
        lua_pop(L, 1);
    }
    set_prov(L, &p->limits.prov);
    for (size_t i = 0; i < NLIMITS; i++)
        if (set[i])
            *dst[i] = val[i];
    lua_settop(L, 1);
    return 1;
}

/* [-0, +1, m] */
static int m_tostring(lua_State *L)
{
    draft *d = luaL_checkudata(L, 1, PLAN_MT);
    if (d->plan)
        lua_pushfstring(L, "a3s.Plan(%s)", d->plan->name ? d->plan->name : "?");
    else
        lua_pushliteral(L, "a3s.Plan(closed)");
    return 1;
}

/* Idempotent: a stolen or freed draft holds NULL. [-0, +0, -] */
static int m_gc(lua_State *L)
{
    draft *d = luaL_checkudata(L, 1, PLAN_MT);
    a3s_plan_free(d->plan);
    d->plan = NULL;
    return 0;
}

static const luaL_Reg plan_methods[] = {
    {"hide", m_hide},
    {"tmpfs", m_tmpfs},
    {"read_only", m_read_only},
    {"writable", m_writable},
    {"protect", m_protect},
    {"mask", m_mask},
    {"rule_kind", m_rule_kind},
    {"replace", m_replace},
    {"protect_names", m_protect_names},
    {"secret_prefix", m_secret_prefix},
    {"scan_skip", m_scan_skip},
    {"env_keep", m_env_keep},
    {"env_keep_prefix", m_env_keep_prefix},
    {"env_strip", m_env_strip},
    {"env_strip_prefix", m_env_strip_prefix},
    {"env_set", m_env_set},
    {"network", m_network},
    {"allow_host_root", m_allow_host_root},
    {"seccomp_deny", m_seccomp_deny},
    {"seccomp", m_seccomp},
    {"limits", m_limits},
    {NULL, NULL},
};

/* Replace the plan's name (checked). [-0, +0, v] */
static void rename_plan(lua_State *L, a3s_plan *p, const char *name)
{
    rt_charge(L, strlen(name) + 1);
    char *n = strdup(name);
    if (!n)
        luaL_error(L, "out of memory");
    free(p->name);
    p->name = n;
}

/* Argument `arg` as a plan name. [-0, +0, v] */
static const char *check_plan_name(lua_State *L, int arg)
{
    size_t len;
    const char *name = check_str(L, arg, &len);
    if (!plan_name_ok(name, len))
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "plan name '%s' must match [A-Za-z0-9_.-]{1,127}", name));
    return name;
}

/* a3s.plan(name) -> a new empty draft. [-1, +1, v] */
static int l_plan(lua_State *L)
{
    const char *name = check_plan_name(L, 1);
    rt_charge(L, sizeof(a3s_plan));
    /* The userdata exists (and owns the pointer) before the C plan does: a later
     * error leaves nothing for C to leak. */
    draft *d = lua_newuserdatauv(L, sizeof *d, 0);
    d->plan = NULL;
    luaL_setmetatable(L, PLAN_MT);
    if (!(d->plan = a3s_plan_new()))
        return luaL_error(L, "out of memory");
    rename_plan(L, d->plan, name);
    return 1;
}

/* Key for the "being evaluated" set: the file's realpath (or its path). */
static void policy_key(const char *path, char *key, size_t n)
{
    char buf[PATH_MAX];
    snprintf(key, n, "%s", realpath(path, buf) ? buf : path);
}

/* a3s.extend(base, name) -> the draft policy `base` returns, renamed `name`. The base is
 * found like a module, runs in a scope of its own (own require cache), and must return
 * a plan. [-2, +1, e] */
static int l_extend(lua_State *L)
{
    size_t len;
    const char *base = check_str(L, 1, &len);
    if (!module_name_ok(base, len))
        return luaL_argerror(L, 1, "policy name expected (like \"baseline\")");
    const char *name = check_plan_name(L, 2);
    lua_settop(L, 2);
    lua_newtable(L); /* 3: the base's own require cache */
    char path[PATH_MAX], key[PATH_MAX];
    load_module(L, base, path, sizeof path); /* 4: chunk */
    set_chunk_env(L, 4, 3);
    policy_key(path, key, sizeof key);
    lua_getfield(L, LUA_REGISTRYINDEX, REG_EXTENDING); /* 5 */
    if (lua_getfield(L, 5, key) != LUA_TNIL)
        return luaL_error(L, "a3s.extend: policy '%s' (%s) is already being evaluated "
                             "(extend cycle)",
                          base, path);
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
    lua_setfield(L, 5, key);
    lua_pushvalue(L, 4);
    int st = lua_pcall(L, 0, 1, 0); /* 6: result */
    lua_pushnil(L);
    lua_setfield(L, 5, key);
    if (st != LUA_OK)
        return lua_error(L);
    draft *d = luaL_testudata(L, 6, PLAN_MT);
    if (!d || !d->plan)
        return luaL_error(L, "a3s.extend: policy '%s' (%s) must return a plan, got %s", base,
                          path, luaL_typename(L, 6));
    rename_plan(L, d->plan, name);
    return 1;
}

/* ------------------------------------------------------------------ host queries */

/* a3s.host.exists(path) -> bool: something is at path (lstat; a symlink counts, even a
 * dangling one). false when it cannot be examined. [-1, +1, v] */
static int h_exists(lua_State *L)
{
    struct stat st;
    const char *p = check_abs(L, 1);
    lua_pushboolean(L, !rt_get(L)->ctx->neutral && lstat(p, &st) == 0);
    return 1;
}

/* a3s.host.is_dir(path) -> bool: a real directory (lstat: not a symlink to one).
 * [-1, +1, v] */
static int h_is_dir(lua_State *L)
{
    struct stat st;
    const char *p = check_abs(L, 1);
    lua_pushboolean(L, !rt_get(L)->ctx->neutral && lstat(p, &st) == 0 && S_ISDIR(st.st_mode));
    return 1;
}

/* a3s.host.realpath(path) -> canonical path | nil. [-1, +1, v] */
static int h_realpath(lua_State *L)
{
    char buf[PATH_MAX];
    const char *p = check_abs(L, 1);
    if (!rt_get(L)->ctx->neutral && realpath(p, buf))
        lua_pushstring(L, buf);
    else
        lua_pushnil(L);
    return 1;
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
    const char *dir = check_rule_path(L, 1);
    size_t plen;
    const char *prefix = check_str(L, 2, &plen);
    luaL_argcheck(L, !strchr(prefix, '/'), 2, "prefix must not contain '/'");
    lua_settop(L, 2);
    if (rt_get(L)->ctx->neutral) { /* a neutral host has no entries */
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
    bool root = strcmp(dir, "/") == 0;
    lua_createtable(L, (int)n, 0); /* 6 */
    for (lua_Integer i = 0; i < n; i++) {
        lua_pushfstring(L, "%s/%s", root ? "" : dir, v[i]);
        lua_rawseti(L, 6, i + 1);
    }
    return 1;
}

/* ------------------------------------------------------------------ setup */

/* string.rep bounded by the memory limit. upvalue 1: the stock rep. [-(2|3), +1, e] */
static int l_rep(lua_State *L)
{
    size_t l, lsep;
    luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    /* The stock rep loops n times even for empty pieces: string.rep("", 2^60) would
     * spin in C where the instruction budget cannot see it. */
    if (n <= 0 || l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    if ((lua_Unsigned)n > RT_MEM_LIMIT / (l + lsep))
        return luaL_error(L, "string.rep: result would exceed the memory limit");
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* setmetatable without __gc: Lua runs finalizers with hooks off (lgc.c GCTM sets
 * allowhook = 0), so a finalizer would escape the instruction budget. An object is only
 * marked for finalization when its metatable has __gc at this moment (manual §2.5.3),
 * so refusing it here is enough. upvalue 1: the base setmetatable. [-2, +1, e] */
static int l_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL)
            return luaL_error(L, "setmetatable: __gc metamethods are not allowed in policies");
        lua_pop(L, 1);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* A policy's xpcall message handler, skipped for the errors the hook raises. Lua calls
 * the handler of an error raised inside a hook before it re-enables hooks
 * (L->allowhook is still 0), so a looping handler would escape the budget. Only the
 * hook raises with hooks off, and only once the budget is spent or the state closes.
 * upvalue 1: the policy's handler. [-1, +1, e] */
static int guarded_msgh(lua_State *L)
{
    rt *r = rt_get(L);
    if (r->budget_hit || r->closing)
        return 1; /* the error as it is */
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* xpcall(f, msgh, ...) with msgh guarded. upvalue 1: the base xpcall. [-?, +?, e] */
static int l_xpcall(lua_State *L)
{
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, guarded_msgh, 1);
    lua_replace(L, 2);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* Table functions loop in C over lengths and ranges the policy controls, out of the
 * hook's sight: refuse a __len metamethod (it can claim any length) and index ranges
 * wider than RT_TABLE_SPAN. upvalues: 1 the function, 2 its name, 3 the argument
 * index of an (i, j) range or 0. [-?, +?, e] */
#define RT_TABLE_SPAN ((lua_Unsigned)1 << 24)

static int l_table_guard(lua_State *L)
{
    const char *name = lua_tostring(L, lua_upvalueindex(2));
    int ri = (int)lua_tointeger(L, lua_upvalueindex(3));
    if (lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1)) {
        lua_pushliteral(L, "__len");
        if (lua_rawget(L, -2) != LUA_TNIL)
            return luaL_error(L, "table.%s: tables with a __len metamethod are not supported",
                              name);
        lua_pop(L, 2);
    }
    if (ri && !lua_isnoneornil(L, ri + 1)) {
        int ok_i = 1, ok_j = 0;
        lua_Integer i = lua_isnoneornil(L, ri) ? 1 : lua_tointegerx(L, ri, &ok_i);
        lua_Integer j = lua_tointegerx(L, ri + 1, &ok_j);
        if (ok_i && ok_j && j >= i && (lua_Unsigned)j - (lua_Unsigned)i >= RT_TABLE_SPAN)
            return luaL_error(L, "table.%s: range of more than %d elements", name,
                              (int)RT_TABLE_SPAN);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* Pattern matching is one C call the hook cannot interrupt, and backtracking makes it
 * polynomial: each '*', '+', '-' (and %b, %1-%9) may multiply the work by the subject
 * length, unanchored searches try every start, and every start may compare the whole
 * pattern (a plain find too). Refuse calls whose worst case
 * (len+1)^(quantifiers + 1) * (pattern length + 1) exceeds RT_MATCH_BUDGET steps.
 * upvalues: 1 the function, 2 its name. [-?, +?, e] */
#define RT_MATCH_BUDGET 2e8 /* about a second of matching, worst case */

static int l_pattern_guard(lua_State *L)
{
    const char *name = lua_tostring(L, lua_upvalueindex(2));
    size_t sl, pl;
    luaL_checklstring(L, 1, &sl);
    const char *p = luaL_checklstring(L, 2, &pl);
    bool plain = strcmp(name, "find") == 0 && lua_toboolean(L, 4);
    {
        int q = 0;
        for (size_t i = 0; !plain && i < pl; i++) {
            if (p[i] == '%' && i + 1 < pl) {
                i++;
                if (p[i] == 'b' || (p[i] >= '1' && p[i] <= '9'))
                    q++;
            } else if (p[i] == '*' || p[i] == '+' || p[i] == '-') {
                q++;
            }
        }
        /* '^' anchors find/match/gsub to one start; gmatch ignores it. */
        int e = q + ((!plain && pl > 0 && p[0] == '^' && strcmp(name, "gmatch") != 0) ? 0 : 1);
        double cost = (double)pl + 1;
        for (int i = 0; i < e && cost <= RT_MATCH_BUDGET; i++)
            cost *= (double)sl + 1;
        if (cost > RT_MATCH_BUDGET)
            return luaL_error(L,
                              "string.%s: pattern too costly for a %d-byte subject (%d "
                              "repetitions; simplify the pattern or split the text)",
                              name, (int)(sl > INT_MAX ? INT_MAX : sl), q);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* Replace lib[name] by a guard closure over the original: upvalues (original, name
 * [, extra integer]). [-0, +0, m] */
static void guard(lua_State *L, int lib, const char *name, lua_CFunction fn, int extra)
{
    lua_getfield(L, lib, name);
    lua_pushstring(L, name);
    int n = 2;
    if (extra >= 0) {
        lua_pushinteger(L, extra);
        n = 3;
    }
    lua_pushcclosure(L, fn, n);
    lua_setfield(L, lib, name);
}

/* Open the allowed libraries and build the shared globals from an allowlist.
 * [-0, +1, m]: pushes the shared globals table. */
static void open_libs(lua_State *L)
{
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},         {LUA_STRLIBNAME, luaopen_string},
        {LUA_TABLIBNAME, luaopen_table},   {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},   {NULL, NULL},
    };
    static const char *const base_allow[] = {
        "assert", "error",  "getmetatable", "ipairs", "next",   "pairs",
        "pcall",  "rawequal", "rawget",     "rawlen", "rawset", "select",
        "tonumber", "tostring", "type", "_VERSION", NULL,
    };
    for (const luaL_Reg *lib = libs; lib->func; lib++) {
        luaL_requiref(L, lib->name, lib->func, 1);
        lua_pop(L, 1);
    }
    lua_pushglobaltable(L); /* g0: everything the libraries opened */
    int g0 = lua_gettop(L);
    lua_getfield(L, g0, "load");
    lua_setfield(L, LUA_REGISTRYINDEX, REG_BASE_LOAD);

    lua_createtable(L, 0, 32); /* the shared globals */
    int g = lua_gettop(L);
    for (const char *const *n = base_allow; *n; n++) {
        lua_getfield(L, g0, *n);
        lua_setfield(L, g, *n);
    }
    lua_getfield(L, g0, "setmetatable");
    lua_pushcclosure(L, l_setmetatable, 1);
    lua_setfield(L, g, "setmetatable");
    lua_getfield(L, g0, "xpcall");
    lua_pushcclosure(L, l_xpcall, 1);
    lua_setfield(L, g, "xpcall");

    /* string: no dump (bytecode); rep bounded; the metatable locked (getmetatable("")
     * returns false), so methods on strings cannot be redirected. */
    lua_getfield(L, g0, LUA_STRLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_getfield(L, -1, "rep");
    lua_pushcclosure(L, l_rep, 1);
    lua_setfield(L, -2, "rep");
    {
        int lib = lua_gettop(L);
        static const char *const pat[] = {"find", "match", "gmatch", "gsub"};
        for (size_t i = 0; i < sizeof pat / sizeof pat[0]; i++)
            guard(L, lib, pat[i], l_pattern_guard, -1);
    }
    push_readonly(L, -1, "string");
    lua_setfield(L, g, LUA_STRLIBNAME);
    lua_pop(L, 1);
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);

    /* math: a plan must not depend on chance. */
    lua_getfield(L, g0, LUA_MATHLIBNAME);
    lua_pushnil(L);
    lua_setfield(L, -2, "random");
    lua_pushnil(L);
    lua_setfield(L, -2, "randomseed");
    push_readonly(L, -1, "math");
    lua_setfield(L, g, LUA_MATHLIBNAME);
    lua_pop(L, 1);

    /* table: every function that loops over a length or a range is guarded. */
    lua_getfield(L, g0, LUA_TABLIBNAME);
    {
        int lib = lua_gettop(L);
        guard(L, lib, "insert", l_table_guard, 0);
        guard(L, lib, "remove", l_table_guard, 0);
        guard(L, lib, "sort", l_table_guard, 0);
        guard(L, lib, "concat", l_table_guard, 3);
        guard(L, lib, "unpack", l_table_guard, 2);
        guard(L, lib, "move", l_table_guard, 2);
    }
    push_readonly(L, -1, LUA_TABLIBNAME);
    lua_setfield(L, g, LUA_TABLIBNAME);
    lua_pop(L, 1);

    lua_getfield(L, g0, LUA_UTF8LIBNAME);
    push_readonly(L, -1, LUA_UTF8LIBNAME);
    lua_setfield(L, g, LUA_UTF8LIBNAME);
    lua_pop(L, 1);
    lua_remove(L, g0); /* stack: ..., shared globals */
}

/* ctx: the read-only facts a policy may use. [-0, +1, m] */
static void push_ctx(lua_State *L, const a3s_policy_ctx *c)
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
    push_readonly(L, env, "ctx.env");
    lua_setfield(L, t, "env");
    lua_pop(L, 1);

    /* path_dirs: absolute PATH entries that are directories, canonical, deduplicated. */
    lua_newtable(L);
    int dirs = lua_gettop(L);
    lua_newtable(L);
    int seen = lua_gettop(L);
    lua_Integer n = 0;
    for (const char *s = path_value; s && *s;) {
        const char *colon = strchr(s, ':');
        size_t len = colon ? (size_t)(colon - s) : strlen(s);
        char seg[PATH_MAX], canon[PATH_MAX];
        struct stat st;
        if (len > 0 && len < sizeof seg && s[0] == '/') {
            memcpy(seg, s, len);
            seg[len] = '\0';
            if (realpath(seg, canon) && stat(canon, &st) == 0 && S_ISDIR(st.st_mode) &&
                lua_getfield(L, seen, canon) == LUA_TNIL) {
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
    push_readonly(L, dirs, "ctx.path_dirs");
    lua_setfield(L, t, "path_dirs");
    lua_pop(L, 1);
    push_readonly(L, t, "ctx");
    lua_remove(L, t);
}

/* a3s: the policy API. [-0, +1, m] */
static void push_api(lua_State *L)
{
    static const luaL_Reg host[] = {
        {"exists", h_exists},
        {"is_dir", h_is_dir},
        {"realpath", h_realpath},
        {"glob_prefix", h_glob_prefix},
        {NULL, NULL},
    };
    lua_createtable(L, 0, 4);
    lua_pushcfunction(L, l_plan);
    lua_setfield(L, -2, "plan");
    lua_pushcfunction(L, l_extend);
    lua_setfield(L, -2, "extend");
    lua_pushliteral(L, A3S_SANDBOX_VERSION);
    lua_setfield(L, -2, "version");
    luaL_newlib(L, host);
    push_readonly(L, -1, "a3s.host");
    lua_setfield(L, -3, "host");
    lua_pop(L, 1);
    push_readonly(L, -1, "a3s");
    lua_remove(L, -2);
}

/* The protected main: build the locked state, run the policy, steal its plan.
 * [-0, +0, e] */
static int rt_main(lua_State *L)
{
    rt *r = rt_get(L);
    luaL_checkstack(L, 32, NULL);

    /* Metatables: the plan draft (methods in __index, locked) and the DIR box. */
    luaL_newmetatable(L, PLAN_MT);
    luaL_newlib(L, plan_methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, m_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, m_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
    luaL_newmetatable(L, DIR_MT);
    lua_pushcfunction(L, dir_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);

    open_libs(L); /* stack: G */
    int g = lua_gettop(L);
    push_ctx(L, r->ctx);
    lua_setfield(L, g, "ctx");
    push_api(L);
    lua_setfield(L, g, "a3s");
    /* G becomes the registry's globals: the library table with dofile, loadfile,
     * collectgarbage, print and the raw load is now unreachable. */
    lua_pushvalue(L, g);
    lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
    lua_createtable(L, 0, 2); /* environment metatable */
    lua_pushvalue(L, g);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setfield(L, LUA_REGISTRYINDEX, REG_ENV_MT);

    char key[PATH_MAX];
    lua_newtable(L);
    policy_key(r->src->path, key, sizeof key);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, key);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_EXTENDING);

    /* The policy itself, in the first scope. */
    lua_newtable(L); /* require cache */
    int cache = lua_gettop(L);
    size_t len = strlen(r->src->text);
    char chunkname[PATH_MAX + 2];
    snprintf(chunkname, sizeof chunkname, "@%s", r->src->path);
    if (luaL_loadbufferx(L, r->src->text, len, chunkname, "t") != LUA_OK)
        return lua_error(L);
    set_chunk_env(L, -1, cache);
    lua_call(L, 0, 1);
    draft *d = luaL_testudata(L, -1, PLAN_MT);
    if (!d || !d->plan) {
        lua_pushfstring(L, "policy must return a plan (from a3s.plan or a3s.extend), got %s",
                        luaL_typename(L, -1));
        return lua_error(L);
    }
    r->result = d->plan; /* steal: the draft's __gc now frees nothing */
    d->plan = NULL;
    return 0;
}

/* ------------------------------------------------------------------ public API */

int a3s_policy_resolve(const char *policy, const char *const *search_path,
                       a3s_policy_src *out, a3s_error *err)
{
    if (!out)
        return a3s_fail(err, A3S_ERR_INVALID, "policy: no output");
    memset(out, 0, sizeof *out);
    if (!policy || !*policy)
        return a3s_fail(err, A3S_ERR_POLICY, "policy: no policy given");
    size_t n = strlen(policy);
    bool is_file = strchr(policy, '/') || (n > 4 && strcmp(policy + n - 4, ".lua") == 0);
    char path[PATH_MAX];
    char *text = NULL;
    size_t len = 0;
    if (is_file) {
        if (n >= sizeof path)
            return a3s_fail(err, A3S_ERR_POLICY, "policy file %.64s...: path too long", policy);
        memcpy(path, policy, n + 1);
        int rc = read_policy_file(path, &text, &len, err);
        if (rc < 0)
            return -1;
        if (rc > 0)
            return a3s_fail_errno(err, A3S_ERR_POLICY, ENOENT, "policy file %s", policy);
    } else {
        /* A name: letters, digits, '_', '-', '.' (not leading: no hidden files or "..").*/
        if (policy[0] == '.' || !plan_name_ok(policy, n))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "policy name '%s' must match [A-Za-z0-9_-][A-Za-z0-9_.-]* (or give "
                            "a file path)",
                            policy);
        int rc = 1;
        for (size_t i = 0; rc == 1 && search_path && search_path[i]; i++) {
            int w = snprintf(path, sizeof path, "%s/%s.lua", search_path[i], policy);
            if (w < 0 || (size_t)w >= sizeof path)
                continue;
            rc = read_policy_file(path, &text, &len, err);
        }
        if (rc < 0)
            return -1;
        if (rc > 0) {
            char dirs[1024] = "";
            size_t used = 0;
            for (size_t i = 0; search_path && search_path[i] && used < sizeof dirs; i++) {
                int w = snprintf(dirs + used, sizeof dirs - used, "%s%s", i ? ", " : "",
                                 search_path[i]);
                if (w < 0)
                    break;
                used += (size_t)w;
            }
            return a3s_fail(err, A3S_ERR_POLICY,
                            "policy '%s' not found in the policy search path (%s)", policy,
                            used ? dirs : "empty");
        }
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t bl = strlen(base);
    if (bl > 4 && strcmp(base + bl - 4, ".lua") == 0)
        bl -= 4;
    out->name = a3s_strndup(base, bl);
    out->path = a3s_strdup(path);
    out->text = text;
    if (!out->name || !out->path) {
        a3s_policy_src_free(out);
        return a3s_fail(err, A3S_ERR_INTERNAL, "policy: out of memory");
    }
    return 0;
}

a3s_plan *a3s_policy_eval(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                          a3s_error *err)
{
    if (!src || !src->path || !src->text || !ctx) {
        a3s_fail(err, A3S_ERR_INVALID, "policy: no policy source or context");
        return NULL;
    }
    const char *roots[4] = {ctx->workspace, ctx->scratch, ctx->home, ctx->tmp};
    static const char *const rname[4] = {"workspace", "scratch", "home", "tmp"};
    for (int i = 0; i < 4; i++) {
        if (!roots[i] || !a3s_path_is_clean(roots[i])) {
            a3s_fail(err, A3S_ERR_INVALID,
                     "policy %s: the %s root '%s' is not a clean absolute path", src->path,
                     rname[i], roots[i] ? roots[i] : "(none)");
            return NULL;
        }
    }

    rt r = {.limit = RT_MEM_LIMIT, .src = src, .ctx = ctx, .start_ms = a3s_now_ms()};
    lua_State *L = lua_newstate(rt_alloc, &r);
    if (!L) {
        a3s_fail(err, A3S_ERR_INTERNAL, "policy %s: cannot create a Lua state (out of memory)",
                 src->path);
        return NULL;
    }
    lua_sethook(L, rt_hook, LUA_MASKCOUNT, RT_HOOK_STEP);
    /* Neither push allocates (the fresh stack has LUA_MINSTACK free slots), so nothing
     * runs unprotected. */
    lua_pushcfunction(L, rt_msgh);
    lua_pushcfunction(L, rt_main);
    int st = lua_pcall(L, 0, 0, 1);

    char msg[1536] = "";
    if (r.budget_hit)
        snprintf(msg, sizeof msg, "%s", r.stop_msg);
    else if (r.mem_hit || st == LUA_ERRMEM)
        snprintf(msg, sizeof msg, "memory limit exceeded (%zu MiB)", RT_MEM_LIMIT >> 20);
    else if (st != LUA_OK)
        copy_message(msg, sizeof msg,
                     lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "unknown error");
    else if (!r.result)
        snprintf(msg, sizeof msg, "policy returned no plan");

    /* No policy code runs after evaluation: finalizers it left behind die at their
     * first instruction (C finalizers, which free unreturned drafts, still run). */
    r.closing = true;
    lua_sethook(L, rt_hook, LUA_MASKCOUNT, 1);
    lua_close(L);

    a3s_plan *p = r.result;
    if (msg[0]) {
        a3s_plan_free(p);
        a3s_fail(err, A3S_ERR_POLICY, "policy %s: %s", src->path, msg);
        return NULL;
    }
    a3s_error e;
    char *source = strdup(src->path);
    if (!source) {
        a3s_plan_free(p);
        a3s_fail(err, A3S_ERR_INTERNAL, "policy %s: out of memory", src->path);
        return NULL;
    }
    free(p->source);
    p->source = source;
    if (a3s_plan_set_roots(p, ctx->workspace, ctx->scratch, ctx->home, ctx->tmp, &e) < 0 ||
        a3s_plan_validate(p, &e) < 0) {
        a3s_plan_free(p);
        a3s_fail(err, e.code ? e.code : A3S_ERR_POLICY, "policy %s: %s", src->path, e.msg);
        return NULL;
    }
    return p;
}

const a3s_policy_engine a3s_lua_policy_engine = {
    .name = "lua",
    .resolve = a3s_policy_resolve,
    .eval = a3s_policy_eval,
};
