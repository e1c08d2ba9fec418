/* `require "a3s_sandbox"`: the Lua module for Lua-hosted tools (README "Lua module").
 *
 * Operational failures return nil, message; misuse (wrong argument types, unknown
 * options) raises.
 *
 * Callbacks (the on_output observer, the audit function) are called from inside
 * a3s_sandbox_exec, below the engine's C frames. A Lua error (or a memory error) that
 * longjmp'ed through those frames would skip their cleanup and leak the running process
 * tree, fds, workspace pins and the scratch dir. So every call into Lua made there is a
 * protected call that also pushes the callback's arguments (a memory error while pushing
 * the data is caught too). The first error value stays on the stack of sb:exec, a
 * failing observer stops the run (the tree is killed at once), and only after
 * a3s_sandbox_exec has returned and released everything is that very value raised again
 * with lua_error. After an error no Lua value is touched until then.
 *
 * Argument errors name the function the way Lua names its own ("bad argument #1 to
 * 'exec'"), whatever the form of the call: luaL_argerror takes the name from the caller's
 * code, which has none for pcall(sb.exec, sb, 42). So every function of the module carries
 * its own name (upvalue 1) and whether it is a method (upvalue 2: self is not counted,
 * as Lua counts it for sb:exec(...)), and the checks here use them. */
#include <jansson.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "a3s_sandbox.h"
#include "lmodule.h"
#include "searchers.h"

/* The arguments of one callback, read by cb_body inside the protected call. */
typedef struct cbargs {
    const char *s[2];
    size_t len[2];
    int n;
} cbargs;

/* [-2, +0, e|m] Stack: the Lua function, the cbargs as light userdata. Pushing the
 * strings happens here, inside the protected call. */
static int cb_body(lua_State *L)
{
    const cbargs *a = lua_touserdata(L, 2);
    lua_settop(L, 1);
    for (int i = 0; i < a->n; i++)
        lua_pushlstring(L, a->s[i], a->len[i]);
    lua_call(L, a->n, 0);
    return 0;
}

/* Call the function at fn_idx with the strings of `a`, protected. Outside the protected
 * call only allocation-free pushes happen (light C function, stack copy, light userdata),
 * so nothing here can raise. On error the error value is left on the stack where
 * lua_pcall puts it, and its slot recorded. Returns 0, or -1 when this exec has failed
 * (now or earlier). */
static int call_protected(lexec *x, int fn_idx, const cbargs *a)
{
    if (x->failed)
        return -1;
    lua_State *L = x->L;
    if (!lua_checkstack(L, 3)) { /* does not raise; no room even for the error value */
        x->failed = true;
        return -1;
    }
    lua_pushcfunction(L, cb_body);
    lua_pushvalue(L, fn_idx);
    lua_pushlightuserdata(L, (void *)a);
    if (lua_pcall(L, 2, 0, 0) != LUA_OK) {
        x->failed = true;
        x->err_idx = lua_gettop(L);
        return -1;
    }
    return 0;
}

/* An audit function that fails does not stop the run, as an audit file whose writes
 * fail does not (engine/run.c): the run goes on under its limits, and its events and
 * output no longer reach Lua; sb:exec raises the error when it is over. (Stopping it
 * through the request's cancel_fd was tried: a kill that early, while bwrap is still
 * starting, can leave the sandbox's pid 1 running.) */
static void on_audit(void *ud, const char *line)
{
    laudit *au = ud;
    lexec *x = au->cur;
    if (!x || !x->audit_idx)
        return;
    cbargs a = {{line, NULL}, {strlen(line), 0}, 1};
    (void)call_protected(x, x->audit_idx, &a);
}

static int on_output(void *ud, int stream, const char *data, size_t len, size_t head_len)
{
    (void)head_len;
    lexec *x = ud;
    if (x->failed)
        return 0; /* the audit function failed: see on_audit */
    const char *name = stream == A3S_STDERR ? "stderr" : "stdout";
    cbargs a = {{name, data}, {strlen(name), len}, 2};
    /* Non-zero: the engine kills the whole tree at once and the exec returns aborted. */
    return call_protected(x, x->output_idx, &a) == 0 ? 0 : 1;
}

/* The running function's own name (see the top of the file). */
static const char *fn_name(lua_State *L)
{
    const char *name = lua_tostring(L, lua_upvalueindex(1));
    return name ? name : "?";
}

/* Raise "bad argument #N to 'NAME' (message)" for the stack slot `arg`; a method's self
 * is "calling 'NAME' on bad self". [-0, +0, v] */
static int arg_error(lua_State *L, int arg, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const char *msg = lua_pushvfstring(L, fmt, ap);
    va_end(ap);
    if (lua_toboolean(L, lua_upvalueindex(2)) && --arg == 0)
        return luaL_error(L, "calling '%s' on bad self (%s)", fn_name(L), msg);
    return luaL_error(L, "bad argument #%d to '%s' (%s)", arg, fn_name(L), msg);
}

/* What luaL_typeerror says, under the function's own name. [-0, +0, v] */
static int type_error(lua_State *L, int arg, const char *expected)
{
    const char *got;
    if (luaL_getmetafield(L, arg, "__name") == LUA_TSTRING)
        got = lua_tostring(L, -1);
    else if (lua_type(L, arg) == LUA_TLIGHTUSERDATA)
        got = "light userdata";
    else
        got = luaL_typename(L, arg);
    return arg_error(L, arg, "%s expected, got %s", expected, got);
}

static void check_table(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        type_error(L, arg, "table");
}

static lsandbox *check_self(lua_State *L)
{
    lsandbox *u = luaL_testudata(L, 1, SANDBOX_MT);
    if (!u)
        type_error(L, 1, SANDBOX_MT);
    return u;
}

static a3s_sandbox *check_sb(lua_State *L)
{
    lsandbox *u = check_self(L);
    if (!u->sb)
        luaL_error(L, "a3s_sandbox: %s: the sandbox is closed", fn_name(L));
    /* Only from one of its own callbacks: the engine is inside an exec of this sandbox
     * and its state must not change (or be freed) under it. */
    if (u->busy)
        luaL_error(L,
                   "a3s_sandbox: %s: the sandbox is running a command (called from one "
                   "of its callbacks)",
                   fn_name(L));
    return u->sb;
}

/* [-0, +2, -] */
static int push_fail(lua_State *L, const char *msg)
{
    luaL_pushfail(L);
    lua_pushstring(L, msg);
    return 2;
}

/* Raise on an unknown key of the options table at `idx`, argument `arg`. [-0, +0, v] */
static void check_keys(lua_State *L, int idx, int arg, const char *const *known)
{
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        lua_pop(L, 1); /* value */
        if (lua_type(L, -1) != LUA_TSTRING)
            arg_error(L, arg, "option keys must be strings");
        const char *k = lua_tostring(L, -1);
        bool ok = false;
        for (size_t i = 0; known[i]; i++)
            if (strcmp(k, known[i]) == 0)
                ok = true;
        if (!ok)
            arg_error(L, arg, "unknown option '%s'", k);
    }
}

/* Field key of the table at idx (absolute), read raw: options are data, and reading them
 * runs no code of the caller's (a metamethod could close the sandbox, or swap a string
 * out from under a pointer). Its type. [-0, +1, -] */
static int raw_field(lua_State *L, int idx, const char *key)
{
    lua_pushstring(L, key);
    return lua_rawget(L, idx);
}

/* Optional string field of the table at idx (absolute; argument `arg`); raises on a wrong
 * type. A string found stays on the stack, so it lives as long as this call whatever a
 * callback does to the options table meanwhile. [-0, +(0|1), v] */
static const char *opt_string_field(lua_State *L, int idx, int arg, const char *key, size_t *len)
{
    int t = raw_field(L, idx, key);
    if (t == LUA_TSTRING)
        return lua_tolstring(L, -1, len);
    if (t != LUA_TNIL)
        arg_error(L, arg, "option '%s' must be a string", key);
    lua_pop(L, 1);
    return NULL;
}

/* Optional boolean field of the table at idx (argument `arg`). [-0, +0, v] */
static bool opt_bool_field(lua_State *L, int idx, int arg, const char *key)
{
    int t = raw_field(L, idx, key);
    if (t != LUA_TNIL && t != LUA_TBOOLEAN)
        arg_error(L, arg, "option '%s' must be a boolean", key);
    bool b = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return b;
}

/* JSON value -> Lua value. [-0, +1, m] */
static void push_json(lua_State *L, json_t *v)
{
    luaL_checkstack(L, 3, "a3s_sandbox: JSON too deep");
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        lua_createtable(L, 0, (int)json_object_size(v));
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) {
            push_json(L, x);
            lua_setfield(L, -2, k);
        }
        break;
    }
    case JSON_ARRAY: {
        lua_createtable(L, (int)json_array_size(v), 0);
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            push_json(L, x);
            lua_rawseti(L, -2, (lua_Integer)i + 1);
        }
        break;
    }
    case JSON_STRING:
        lua_pushlstring(L, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        lua_pushinteger(L, (lua_Integer)json_integer_value(v));
        break;
    case JSON_REAL:
        lua_pushnumber(L, json_real_value(v));
        break;
    case JSON_TRUE:
        lua_pushboolean(L, 1);
        break;
    case JSON_FALSE:
        lua_pushboolean(L, 0);
        break;
    default:
        lua_pushnil(L);
        break;
    }
}

/* Push the JSON text as a Lua value, then free the text. [-0, +1|+2, m] */
static int push_json_text(lua_State *L, char *text, const a3s_error *err)
{
    if (!text)
        return push_fail(L, err->msg);
    json_error_t je;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &je); /* output may hold NUL bytes */
    free(text);
    if (!v)
        return push_fail(L, "a3s_sandbox: malformed JSON from the engine");
    push_json(L, v);
    json_decref(v);
    return 1;
}

/* sandbox.new{ workspace=, policy=, bwrap=, audit=, allow_process_host=, allow_host_root= }
 *   -> sb | nil, err */
static int l_new(lua_State *L)
{
    static const char *const keys[] = {"workspace", "policy", "allow_process_host", "bwrap",
                                       "audit", "allow_host_root", NULL};
    a3s_options o = {0};
    if (!lua_isnoneornil(L, 1)) {
        check_table(L, 1);
        check_keys(L, 1, 1, keys);
        o.workspace = opt_string_field(L, 1, 1, "workspace", NULL);
        o.policy = opt_string_field(L, 1, 1, "policy", NULL);
        o.bwrap = opt_string_field(L, 1, 1, "bwrap", NULL);
        o.allow_process_host = opt_bool_field(L, 1, 1, "allow_process_host");
        o.allow_host_root = opt_bool_field(L, 1, 1, "allow_host_root");
    }
    lsandbox *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->sb = NULL;
    u->audit = (laudit){LUA_NOREF, NULL};
    u->busy = false;
    u->sessions = 0;
    luaL_setmetatable(L, SANDBOX_MT);
    if (!lua_isnoneornil(L, 1)) {
        /* audit = "path" (JSON lines appended) or function(json_line) */
        int t = raw_field(L, 1, "audit");
        if (t == LUA_TSTRING) {
            o.audit_path = lua_tostring(L, -1);
            lua_insert(L, -2); /* kept on the stack, below the sandbox (returned on top) */
        } else if (t == LUA_TFUNCTION) {
            u->audit.fn_ref = luaL_ref(L, LUA_REGISTRYINDEX);
            o.audit_fn = on_audit;
            o.audit_ud = &u->audit;
        } else if (t != LUA_TNIL) {
            return arg_error(L, 1, "option 'audit' must be a file path or a function");
        } else {
            lua_pop(L, 1);
        }
    }
    a3s_error err = {0};
    u->sb = a3s_sandbox_new(&o, &err);
    if (u->sb && a3s_searchers_guard(L, u->sb, &err) < 0) {
        a3s_sandbox_free(u->sb);
        u->sb = NULL;
    }
    if (!u->sb)
        return push_fail(L, err.msg);
    return 1;
}

static int l_close(lua_State *L)
{
    lsandbox *u = check_self(L);
    /* __gc cannot get here while busy: l_exec holds the userdata on its stack. */
    if (u->busy)
        return luaL_error(L,
                          "a3s_sandbox: %s: the sandbox is running a command (called "
                          "from one of its callbacks)",
                          fn_name(L));
    if (u->sessions > 0) {
        /* Only an explicit close gets here (a session keeps its sandbox from the GC). */
        return luaL_error(L, "a3s_sandbox: %s: close the sandbox's sessions first",
                          fn_name(L));
    }
    a3s_sandbox_free(u->sb); /* idempotent: __gc and __close may both run */
    u->sb = NULL;
    if (u->audit.fn_ref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, u->audit.fn_ref);
        u->audit.fn_ref = LUA_NOREF;
    }
    return 0;
}

static int l_tostring(lua_State *L)
{
    lsandbox *u = check_self(L);
    if (u->sb)
        lua_pushfstring(L, "a3s.Sandbox(%s, %s)", a3s_sandbox_workspace(u->sb),
                        a3s_sandbox_policy_name(u->sb));
    else
        lua_pushliteral(L, "a3s.Sandbox(closed)");
    return 1;
}

static int l_probe(lua_State *L)
{
    a3s_sandbox *sb = check_sb(L);
    a3s_error err = {0};
    if (a3s_sandbox_probe(sb, &err) != A3S_OK)
        return push_fail(L, err.msg);
    lua_pushboolean(L, 1);
    return 1;
}

static int l_digest(lua_State *L)
{
    a3s_sandbox *sb = check_sb(L);
    a3s_error err = {0};
    char d[65];
    if (a3s_sandbox_digest(sb, d, &err) != A3S_OK)
        return push_fail(L, err.msg);
    lua_pushstring(L, d);
    return 1;
}

static int l_plan(lua_State *L)
{
    a3s_sandbox *sb = check_sb(L);
    a3s_error err = {0};
    return push_json_text(L, a3s_sandbox_plan_json(sb, &err), &err);
}

static int l_explain(lua_State *L)
{
    a3s_sandbox *sb = check_sb(L);
    a3s_error err = {0};
    char *text = a3s_sandbox_plan_explain(sb, &err);
    if (!text)
        return push_fail(L, err.msg);
    lua_pushstring(L, text);
    free(text);
    return 1;
}

/* sb:replace_policy(policy, { allow_broadening = false }) -> true | nil, err */
static int l_replace_policy(lua_State *L)
{
    static const char *const keys[] = {"allow_broadening", NULL};
    a3s_sandbox *sb = check_sb(L);
    const char *policy = lua_tostring(L, 2);
    if (!policy)
        type_error(L, 2, "string");
    bool allow = false;
    if (!lua_isnoneornil(L, 3)) {
        check_table(L, 3);
        check_keys(L, 3, 3, keys);
        allow = opt_bool_field(L, 3, 3, "allow_broadening");
    }
    a3s_error err = {0};
    if (a3s_sandbox_replace_policy(sb, policy, allow, &err) != A3S_OK)
        return push_fail(L, err.msg);
    lua_pushboolean(L, 1);
    return 1;
}

/* The "HOST[:PORT]" spec of the { host =, port = } table at idx (absolute), pushed; IPv6
 * hosts get brackets when a port follows. Errors are of argument `arg`, "entry N: " when
 * `entry` is not 0. [-0, +1, v] */
static const char *push_grant_spec(lua_State *L, int idx, int arg, int entry)
{
    int t = raw_field(L, idx, "host");
    if (t != LUA_TSTRING)
        arg_error(L, arg,
                  t != LUA_TNIL
                      ? (entry ? "entry %d: 'host' must be a string" : "'host' must be a string")
                      : (entry ? "entry %d: 'host' is required" : "'host' is required"),
                  entry);
    const char *host = lua_tostring(L, -1); /* kept on the stack */
    t = raw_field(L, idx, "port");
    lua_Integer port = 0;
    if (t != LUA_TNIL) {
        int isint = 0;
        port = lua_tointegerx(L, -1, &isint);
        if (!isint)
            arg_error(L, arg,
                      entry ? "entry %d: 'port' must be an integer" : "'port' must be an integer",
                      entry);
    }
    lua_pop(L, 1);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    bool v6 = strchr(host, ':') != NULL;
    if (v6 && port)
        luaL_addchar(&b, '[');
    luaL_addstring(&b, host);
    if (v6 && port)
        luaL_addchar(&b, ']');
    if (port) {
        lua_pushfstring(L, ":%I", port);
        luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

/* sb:grant{ host = "h", port = 443, digest = "<approved>" } -> approval digest | nil, err.
 * Adds one grant; the digest, when given, must approve the set held with this grant. */
static int l_grant(lua_State *L)
{
    static const char *const keys[] = {"host", "port", "digest", NULL};
    a3s_sandbox *sb = check_sb(L);
    check_table(L, 2);
    check_keys(L, 2, 2, keys);
    const char *digest = opt_string_field(L, 2, 2, "digest", NULL);
    const char *spec = push_grant_spec(L, 2, 2, 0);
    a3s_error err = {0};
    char d[65];
    if (a3s_sandbox_grant(sb, spec, digest, d, &err) != A3S_OK)
        return push_fail(L, err.msg);
    lua_pushstring(L, d);
    return 1;
}

/* sb:grant_set(grants [, { digest = "<approved>" }]) -> approval digest | nil, err.
 * `grants` is a list of "HOST[:PORT]" strings and/or { host =, port = } tables; it
 * replaces every grant held, and the digest, when given, must approve exactly this set. */
static int l_grant_set(lua_State *L)
{
    static const char *const keys[] = {"digest", NULL};
    static const char *const entry_keys[] = {"host", "port", NULL};
    a3s_sandbox *sb = check_sb(L);
    check_table(L, 2);
    const char *digest = NULL;
    if (!lua_isnoneornil(L, 3)) {
        check_table(L, 3);
        check_keys(L, 3, 3, keys);
        digest = opt_string_field(L, 3, 3, "digest", NULL);
    }
    lua_settop(L, 3);
    /* A list and nothing else: an approval slipped into it (grant_set{ ..., digest = d })
     * would otherwise go unchecked. */
    lua_Unsigned n = lua_rawlen(L, 2), count = 0;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        lua_pop(L, 1);
        count++;
    }
    if (count != n)
        return arg_error(L, 2,
                         "the grants must be a list (options go in the second "
                         "argument)");
    a3s_error err = {0};
    char d[65];
    if (n > A3S_MAX_GRANTS) {
        /* Refused by the library before it reads any spec: the same message everywhere. */
        (void)a3s_sandbox_grant_set(sb, NULL, (size_t)n, digest, d, &err);
        return push_fail(L, err.msg);
    }
    luaL_checkstack(L, (int)n + 8, "grant_set: too many grants");
    /* The spec strings stay on the stack above this array while the library reads them. */
    const char **specs = lua_newuserdatauv(L, (n ? n : 1) * sizeof *specs, 0);
    for (lua_Unsigned i = 1; i <= n; i++) {
        int t = lua_rawgeti(L, 2, (lua_Integer)i);
        if (t == LUA_TSTRING) {
            specs[i - 1] = lua_tostring(L, -1);
        } else if (t == LUA_TTABLE) {
            int e = lua_gettop(L);
            check_keys(L, e, 2, entry_keys);
            specs[i - 1] = push_grant_spec(L, e, 2, (int)i);
            lua_remove(L, e);
        } else {
            return arg_error(L, 2,
                             "entry %d must be a \"HOST[:PORT]\" string or a "
                             "{ host =, port = } table, got %s",
                             (int)i, luaL_typename(L, -1));
        }
    }
    if (a3s_sandbox_grant_set(sb, specs, (size_t)n, digest, d, &err) != A3S_OK)
        return push_fail(L, err.msg);
    lua_pushstring(L, d);
    return 1;
}

static int l_capabilities(lua_State *L)
{
    a3s_sandbox *sb = check_sb(L);
    a3s_error err = {0};
    return push_json_text(L, a3s_sandbox_capabilities_json(sb, &err), &err);
}

/* sb:exec(command | argv, { timeout=, env=, stdin=, cwd=, on_output=, mirror= })
 *   -> result | nil, err */
static int l_exec(lua_State *L)
{
    (void)check_sb(L);
    return a3s_lmod_exec(L, lua_touserdata(L, 1), NULL);
}

int a3s_lmod_fail(lua_State *L, const char *msg)
{
    return push_fail(L, msg);
}

int a3s_lmod_exec(lua_State *L, lsandbox *u, a3s_session *sess)
{
    static const char *const keys[] = {"timeout",   "env",    "stdin", "cwd",
                                       "on_output", "mirror", NULL};
    a3s_sandbox *sb = u->sb;
    lua_settop(L, 3); /* slot 3 is the options table (or nil); scratch values go above */
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    int cmd_type = lua_type(L, 2);
    const char **argv = NULL;
    if (cmd_type == LUA_TSTRING) {
        size_t n;
        const char *s = lua_tolstring(L, 2, &n);
        if (memchr(s, '\0', n))
            return push_fail(L, "exec: the command contains a NUL byte");
        req.shell_command = s;
    } else if (cmd_type == LUA_TTABLE) {
        /* Raw, bounded, and anchored in a table of our own: a metamethod runs no code
         * here, a length cannot overflow the allocation, and a callback that empties the
         * caller's table during the run cannot free an argument under us. */
        lua_Unsigned n = lua_rawlen(L, 2);
        if (n < 1)
            return arg_error(L, 2, "argv table must not be empty");
        if (n > 65536)
            return arg_error(L, 2, "argv table has more than 65536 entries");
        argv = lua_newuserdatauv(L, sizeof *argv * (size_t)(n + 1), 0); /* GC-owned */
        lua_createtable(L, (int)n, 0);
        int anchor = lua_gettop(L);
        for (lua_Unsigned i = 1; i <= n; i++) {
            if (lua_rawgeti(L, 2, (lua_Integer)i) != LUA_TSTRING)
                return arg_error(L, 2, "argv entries must be strings");
            size_t len;
            argv[i - 1] = lua_tolstring(L, -1, &len);
            if (memchr(argv[i - 1], '\0', len))
                return push_fail(L, "exec: an argument contains a NUL byte");
            lua_rawseti(L, anchor, (lua_Integer)i);
        }
        argv[n] = NULL;
        req.argv = argv;
    } else {
        return arg_error(L, 2, "command string or argv table expected");
    }

    lexec x = {L, 0, 0, false, 0};
    const char **env = NULL;
    if (!lua_isnoneornil(L, 3)) {
        check_table(L, 3);
        check_keys(L, 3, 3, keys);
        int t = raw_field(L, 3, "timeout");
        if (t != LUA_TNIL) {
            if (t != LUA_TNUMBER)
                return arg_error(L, 3, "option 'timeout' must be a number (seconds)");
            lua_Number s = lua_tonumber(L, -1);
            if (!(s > 0) || s > 86400)
                return push_fail(L, "exec: the command timeout must be greater than zero "
                                    "and at most 86400 seconds");
            req.timeout_ms = (int64_t)(s * 1000.0 + 0.999);
        }
        lua_pop(L, 1);
        size_t stdin_len = 0;
        req.stdin_data = opt_string_field(L, 3, 3, "stdin", &stdin_len);
        req.stdin_len = stdin_len;
        /* cwd: the library checks the rest (relative, no "..", a directory there). */
        size_t cwd_len = 0;
        req.cwd = opt_string_field(L, 3, 3, "cwd", &cwd_len);
        if (req.cwd && memchr(req.cwd, '\0', cwd_len))
            return push_fail(L, "exec: the working directory contains a NUL byte");
        t = raw_field(L, 3, "env");
        if (t == LUA_TTABLE) {
            size_t n = 0;
            lua_pushnil(L);
            while (lua_next(L, -2) != 0) {
                n++;
                lua_pop(L, 1);
            }
            env = lua_newuserdatauv(L, sizeof *env * (n + 1), 0);
            lua_createtable(L, (int)n, 0); /* keeps the "K=V" strings alive */
            int anchor = lua_gettop(L);
            size_t i = 0;
            lua_pushnil(L);
            while (lua_next(L, anchor - 2) != 0) {
                if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
                    return arg_error(L, 3, "option 'env' must map strings to strings");
                size_t kl, vl;
                const char *k = lua_tolstring(L, -2, &kl);
                const char *v = lua_tolstring(L, -1, &vl);
                if (memchr(k, '\0', kl) || memchr(v, '\0', vl) || memchr(k, '=', kl))
                    return push_fail(L, "invalid explicit command environment entry "
                                        "(a name with '=' or NUL, or a value with NUL)");
                luaL_Buffer b;
                luaL_buffinit(L, &b);
                luaL_addlstring(&b, k, kl);
                luaL_addchar(&b, '=');
                luaL_addlstring(&b, v, vl);
                luaL_pushresult(&b);
                env[i++] = lua_tostring(L, -1);
                lua_rawseti(L, anchor, (lua_Integer)i);
                lua_pop(L, 1);
            }
            env[i] = NULL;
            req.env = env;
        } else if (t != LUA_TNIL) {
            return arg_error(L, 3, "option 'env' must be a table");
        }
        /* mirror = true: the output goes live to the host's own fds 1 and 2, the way the
         * CLI prints it (a stalled reader never holds the deadline off, no SIGPIPE; a
         * reader that goes away kills the tree: r.output_closed). What Lua buffered is
         * written first. */
        if (opt_bool_field(L, 3, 3, "mirror")) {
            req.mirror = true;
            req.mirror_fd[0] = 1;
            req.mirror_fd[1] = 2;
            fflush(stdout);
            fflush(stderr);
        }
        t = raw_field(L, 3, "on_output");
        if (t == LUA_TFUNCTION) {
            x.output_idx = lua_gettop(L);
            req.on_output = on_output;
            req.output_ud = &x;
        } else if (t != LUA_TNIL) {
            return arg_error(L, 3, "option 'on_output' must be a function");
        }
    }

    a3s_result r;
    a3s_error err = {0};
    if (u->audit.fn_ref != LUA_NOREF) {
        lua_rawgeti(L, LUA_REGISTRYINDEX, u->audit.fn_ref);
        x.audit_idx = lua_gettop(L);
    }

    /* From here to the end of a3s_sandbox_exec nothing may raise: the callbacks below
     * are protected, and so is every push they make. */
    u->audit.cur = &x; /* never nested: `busy` refuses a second exec of this sandbox */
    u->busy = true;
    int rc = sess ? a3s_session_exec(sess, &req, &r, &err) : a3s_sandbox_exec(sb, &req, &r, &err);
    u->busy = false;
    u->audit.cur = NULL;

    if (x.failed) {
        /* Everything is released (tree killed, pins and scratch removed): now raise the
         * callback's own error value, untouched since it was caught. */
        if (rc == A3S_OK)
            a3s_result_free(&r);
        if (!x.err_idx)
            return luaL_error(L, "a3s_sandbox: no Lua stack space to call a callback");
        lua_settop(L, x.err_idx);
        return lua_error(L);
    }
    if (rc != A3S_OK)
        return push_fail(L, err.msg);
    char *json = a3s_result_json(&r);
    a3s_result_free(&r);
    return push_json_text(L, json, &err);
}

static const luaL_Reg sandbox_methods[] = {
    {"probe", l_probe},   {"exec", l_exec},
    {"digest", l_digest}, {"plan", l_plan}, {"explain", l_explain},
    {"capabilities", l_capabilities}, {"replace_policy", l_replace_policy},
    {"grant", l_grant}, {"grant_set", l_grant_set},
    {"session", a3s_lsession_open}, {"close", l_close},
    {NULL, NULL},
};

static const luaL_Reg sandbox_meta[] = {
    {"__index", NULL}, {"__gc", l_close}, {"__close", l_close}, {"__tostring", l_tostring},
    {NULL, NULL},
};

static const luaL_Reg module_funcs[] = {
    {"new", l_new},
    {NULL, NULL},
};

int luaopen_a3s_sandbox(lua_State *L);

/* Set the functions of `l` into the table on top, each a closure over its own name and
 * whether it is a method (see the top of the file). */
static void set_named(lua_State *L, const luaL_Reg *l, bool method)
{
    for (; l->name; l++) {
        if (!l->func)
            continue;
        lua_pushstring(L, l->func == l_close ? "close" : l->name); /* __gc, __close too */
        lua_pushboolean(L, method);
        lua_pushcclosure(L, l->func, 2);
        lua_setfield(L, -2, l->name);
    }
}

int luaopen_a3s_sandbox(lua_State *L)
{
    luaL_newmetatable(L, SANDBOX_MT);
    set_named(L, sandbox_meta, true);
    luaL_newlibtable(L, sandbox_methods);
    set_named(L, sandbox_methods, true);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    a3s_lsession_register(L);
    luaL_newlibtable(L, module_funcs);
    set_named(L, module_funcs, false);
    lua_pushstring(L, a3s_version());
    lua_setfield(L, -2, "version");
    return 1;
}
