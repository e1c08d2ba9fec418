/* The locked Lua state a policy is evaluated in (policies/README.md, "The Lua environment").
 *
 * Shape:
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
 *     are read-only proxies, so a derived policy cannot change what its base sees. */
#include "builtin.h"
#include "facts.h"
#include "runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "util.h"

#define RT_INSN_BUDGET 50000000L      /* Lua VM instructions per evaluation */
#define RT_TIME_LIMIT_MS 5000ULL      /* wall clock per evaluation */
#define RT_HOOK_STEP 100              /* instructions between two budget checks */
#define RT_MAX_FILE ((size_t)1 << 20) /* largest policy / module file */
#define RT_MODNAME_MAX 128

#define REG_ENV_MT "a3s.env_mt"       /* metatable of every chunk environment */
#define REG_BASE_LOAD "a3s.base_load" /* the base library's load, wrapped per scope */

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
void a3s_lua_state_charge(lua_State *L, size_t n)
{
    rt *r = a3s_rt_get(L);
    if (n > r->limit - r->plan_bytes || r->used + r->plan_bytes + n > r->limit) {
        r->mem_hit = true;
        luaL_error(L, "memory limit exceeded (%d MiB)", (int)(r->limit >> 20));
    }
    r->plan_bytes += n;
}

static void rt_hook(lua_State *L, lua_Debug *ar)
{
    rt *r = a3s_rt_get(L);
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

lua_State *a3s_lua_state_new(rt *r)
{
    lua_State *L = lua_newstate(rt_alloc, r);
    if (L)
        lua_sethook(L, rt_hook, LUA_MASKCOUNT, RT_HOOK_STEP);
    return L;
}

void a3s_lua_state_close(lua_State *L)
{
    /* No policy code runs after evaluation: finalizers it left behind die at their
     * first instruction (C finalizers, which free unreturned drafts, still run). */
    a3s_rt_get(L)->closing = true;
    lua_sethook(L, rt_hook, LUA_MASKCOUNT, 1);
    lua_close(L);
}

/* ------------------------------------------------------------------ files */

/* Read a policy or module file: a regular file of at most RT_MAX_FILE bytes without NUL
 * bytes. 0 and *text (malloc'd, NUL-terminated); 1 when it does not exist; -1 and err. */
/* Does the file open as fd lie below guard? Its path as the kernel resolved it: a link
 * re-pointed between checks is followed here, not earlier. */
static bool below_guard(int fd, const char *guard)
{
    char proc[64], real[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(proc, real, sizeof real - 1);
    if (n < 0)
        return true; /* unknown: not trusted */
    real[n] = '\0';
    return a3s_path_within(real, guard);
}

int a3s_lua_state_read_file(const char *path, const char *guard, char **text, size_t *len,
                            a3s_error *err)
{
    *text = NULL;
    *len = 0;
    /* The shipped policies built into the program (builtin.h). */
    if (a3s_builtin_is(path)) {
        const a3s_builtin_file *f = a3s_builtin_find(path);
        if (!f)
            return 1;
        if (!(*text = malloc(f->len + 1)))
            return a3s_fail(err, A3S_ERR_INTERNAL, "policy %s: out of memory", path);
        memcpy(*text, f->data, f->len);
        (*text)[f->len] = '\0';
        *len = f->len;
        return 0;
    }
    /* O_NONBLOCK: opening a FIFO planted at the path must not hang the evaluation. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 1;
        return a3s_fail_errno(err, A3S_ERR_POLICY, errno, "policy %s: cannot open", path);
    }
    if (guard && below_guard(fd, guard)) {
        close(fd);
        return a3s_fail(err, A3S_ERR_POLICY,
                        "policy %s: lies inside the workspace %s, where the command could have "
                        "written it: refused",
                        path, guard);
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

/* [A-Za-z0-9_]+(\.[A-Za-z0-9_]+)* */
bool a3s_lua_state_module_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > RT_MODNAME_MAX || strlen(s) != len)
        return false;
    bool want = true; /* a component character is required next */
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '.') {
            if (want)
                return false;
            want = true;
        } else if (a3s_rt_is_name_char(s[i])) {
            want = false;
        } else {
            return false;
        }
    }
    return !want;
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
void a3s_lua_state_set_chunk_env(lua_State *L, int fn_idx, int cache_idx)
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
    int st = a3s_builtin_load(L, text, len, chunkname)
                 ? LUA_OK
                 : luaL_loadbufferx(L, text, len, chunkname, "t");
    free(text);
    if (st != LUA_OK)
        lua_error(L);
}

/* Find module `name` (dots -> '/') + ".lua" in the search path, load it in text mode
 * and push the chunk; the resolved path is written to path_out. [-0, +1, e] */
void a3s_lua_state_load_module(lua_State *L, const char *name, char *path_out, size_t path_n)
{
    rt *r = a3s_rt_get(L);
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
        int rc = a3s_lua_state_read_file(path_out, r->ctx->guard, &text, &len, &e);
        if (rc < 0)
            luaL_error(L, "%s", e.msg);
        /* Found or not, what was looked for here is a fact of this evaluation. */
        a3s_facts_add(r->facts, A3S_FACT_FILE, path_out, strlen(path_out), text, len, rc == 0);
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
    if (!a3s_lua_state_module_name_ok(name, len))
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
    a3s_lua_state_load_module(L, name, path, sizeof path); /* stack: name, chunk */
    a3s_lua_state_set_chunk_env(L, -1, cache);
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
void a3s_lua_state_push_readonly(lua_State *L, int idx, const char *what)
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
const char *a3s_lua_state_check_str(lua_State *L, int arg, size_t *lenp)
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
const char *a3s_lua_state_check_abs(lua_State *L, int arg)
{
    size_t len;
    const char *p = a3s_lua_state_check_str(L, arg, &len);
    if (p[0] != '/')
        luaL_argerror(L, arg, lua_pushfstring(L, "absolute path expected, got '%s'", p));
    if (len >= PATH_MAX)
        luaL_argerror(L, arg, "path too long");
    return p;
}

/* Argument `arg` as a clean absolute path for a rule. [-0, +0, v] */
const char *a3s_lua_state_check_rule_path(lua_State *L, int arg)
{
    const char *p = a3s_lua_state_check_abs(L, arg);
    if (!a3s_path_is_clean(p))
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "path '%s' is not clean (no '.', '..', '//' or "
                                         "trailing '/')",
                                      p));
    return p;
}

/* ------------------------------------------------------------------ libraries */

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
 * marked for finalization when its metatable has __gc at this moment (Lua 5.4 Reference Manual §2.5.3),
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
    rt *r = a3s_rt_get(L);
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
void a3s_lua_state_open_libs(lua_State *L)
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
    a3s_lua_state_push_readonly(L, -1, "string");
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
    a3s_lua_state_push_readonly(L, -1, "math");
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
    a3s_lua_state_push_readonly(L, -1, LUA_TABLIBNAME);
    lua_setfield(L, g, LUA_TABLIBNAME);
    lua_pop(L, 1);

    lua_getfield(L, g0, LUA_UTF8LIBNAME);
    a3s_lua_state_push_readonly(L, -1, LUA_UTF8LIBNAME);
    lua_setfield(L, g, LUA_UTF8LIBNAME);
    lua_pop(L, 1);
    lua_remove(L, g0); /* stack: ..., shared globals */
}

void a3s_lua_state_set_globals(lua_State *L, int g)
{
    g = lua_absindex(L, g);
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
}
