/* The plan-builder API exposed to policies: a3s.plan, a3s.extend and the methods of the
 * draft. Builders append to a C plan owned by a userdata draft ("a3s.Plan", liolib
 * style); after evaluation C steals the returned draft's plan (a3s_plan_api_steal).
 * Every rule records where it was declared, and the C memory of the plan is charged
 * against the state's memory cap. */
#include "runtime.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <lauxlib.h>

#define RT_PLANNAME_MAX 127 /* a3s_result.policy holds 127 characters */

#define PLAN_MT "a3s.Plan"
#define REG_EXTENDING "a3s.extending" /* realpaths of policies being evaluated */

typedef struct draft {
    a3s_plan *plan; /* NULL once freed or stolen */
} draft;

/* [A-Za-z0-9_.-]{1,127} (the plan's name rule) */
bool a3s_plan_api_name_ok(const char *s, size_t len)
{
    if (len == 0 || len > RT_PLANNAME_MAX || strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!a3s_rt_is_name_char(s[i]) && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

/* ------------------------------------------------------------------ argument checks */

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
    *file = a3s_rt_get(L)->src->path;
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
    a3s_lua_state_charge(L, strlen(file) + 1);
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
    const char *path = a3s_lua_state_check_rule_path(L, 2);
    fs_opts o;
    check_fs_opts(L, 3, fname, &o);
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    a3s_lua_state_charge(L, sizeof(a3s_fs_rule) + strlen(path) + strlen(file) + 2);
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
    const char *path = a3s_lua_state_check_rule_path(L, 2);
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
    const char *path = a3s_lua_state_check_rule_path(L, 2);
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
        a3s_lua_state_charge(L, sizeof(a3s_name) + strlen(s) + strlen(file) + 2);
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
    const char *s = a3s_lua_state_check_str(L, 2, &len);
    luaL_argcheck(L, len > 0, 2, "empty prefix");
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    a3s_lua_state_charge(L, sizeof(a3s_name) + len + strlen(file) + 2);
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
    const char *name = a3s_lua_state_check_str(L, 2, &nl);
    const char *value = a3s_lua_state_check_str(L, 3, &vl);
    luaL_argcheck(L, nl > 0, 2, "empty name");
    fs_opts o;
    check_fs_opts(L, 4, "env_set", &o);
    if (o.optional)
        luaL_error(L, "env_set: option 'optional' does not apply to environment values");
    const char *file;
    int line;
    caller_prov(L, &file, &line);
    a3s_lua_state_charge(L, sizeof(a3s_kv) + nl + vl + strlen(file) + 3);
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
    const char *mode = a3s_lua_state_check_str(L, 2, NULL);
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
    const char *name = lua_isnoneornil(L, arg) ? dflt : a3s_lua_state_check_str(L, arg, NULL);
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
        a3s_lua_state_charge(L, sizeof(a3s_sc_rule) + strlen(sc) + strlen(file) + 2);
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
                a3s_lua_state_charge(L, sizeof(int));
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

/* ------------------------------------------------------------------ a3s.plan, a3s.extend */

/* Replace the plan's name (checked). [-0, +0, v] */
static void rename_plan(lua_State *L, a3s_plan *p, const char *name)
{
    a3s_lua_state_charge(L, strlen(name) + 1);
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
    const char *name = a3s_lua_state_check_str(L, arg, &len);
    if (!a3s_plan_api_name_ok(name, len))
        luaL_argerror(L, arg,
                      lua_pushfstring(L, "plan name '%s' must match [A-Za-z0-9_.-]{1,127}", name));
    return name;
}

/* a3s.plan(name) -> a new empty draft. [-1, +1, v] */
int a3s_plan_api_new(lua_State *L)
{
    const char *name = check_plan_name(L, 1);
    a3s_lua_state_charge(L, sizeof(a3s_plan));
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
int a3s_plan_api_extend(lua_State *L)
{
    size_t len;
    const char *base = a3s_lua_state_check_str(L, 1, &len);
    if (!a3s_lua_state_module_name_ok(base, len))
        return luaL_argerror(L, 1, "policy name expected (like \"baseline\")");
    const char *name = check_plan_name(L, 2);
    lua_settop(L, 2);
    lua_newtable(L); /* 3: the base's own require cache */
    char path[PATH_MAX], key[PATH_MAX];
    a3s_lua_state_load_module(L, base, path, sizeof path); /* 4: chunk */
    a3s_lua_state_set_chunk_env(L, 4, 3);
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

/* ------------------------------------------------------------------ evaluation */

void a3s_plan_api_register(lua_State *L)
{
    /* The plan draft: methods in __index, locked. */
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
}

void a3s_plan_api_begin(lua_State *L, const char *path)
{
    char key[PATH_MAX];
    lua_newtable(L);
    policy_key(path, key, sizeof key);
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, key);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_EXTENDING);
}

a3s_plan *a3s_plan_api_steal(lua_State *L, int idx)
{
    draft *d = luaL_testudata(L, idx, PLAN_MT);
    if (!d || !d->plan)
        return NULL;
    a3s_plan *p = d->plan; /* steal: the draft's __gc now frees nothing */
    d->plan = NULL;
    return p;
}
