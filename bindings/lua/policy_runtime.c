/* The Lua policy engine: resolve a policy and evaluate it into a plan in a locked Lua
 * state (policies/README.md), the seam of engine/policy.h.
 *
 * Shape:
 *   - the locked state (lua_state.c): a limiting allocator, an instruction and clock
 *     budget, allowlisted libraries, text-only loads, `require` limited to the policy
 *     search path, read-only shared tables;
 *   - all setup and evaluation run inside one lua_pcall'ed C function with a message
 *     handler (lua.c pmain/docall/msghandler), so nothing can panic;
 *   - builders append to a C plan owned by a userdata draft ("a3s.Plan", liolib style,
 *     plan_api.c); after the pcall C steals the returned draft's plan and closes the
 *     state;
 *   - host facts reach the policy only through a3s.host and ctx (host_query.c).
 * Every failure becomes A3S_ERR_POLICY "policy <path>: <message>". */
#include "policy_runtime.h"

#include "builtin.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "aliases.h"
#include "facts.h"
#include "runtime.h"
#include "util.h"

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

/* ------------------------------------------------------------------ setup */

/* a3s: the policy API. [-0, +1, m] */
static void push_api(lua_State *L)
{
    lua_createtable(L, 0, 4);
    lua_pushcfunction(L, a3s_plan_api_new);
    lua_setfield(L, -2, "plan");
    lua_pushcfunction(L, a3s_plan_api_extend);
    lua_setfield(L, -2, "extend");
    lua_pushliteral(L, A3S_SANDBOX_VERSION);
    lua_setfield(L, -2, "version");
    a3s_host_query_push_lib(L);
    a3s_lua_state_push_readonly(L, -1, "a3s.host");
    lua_setfield(L, -3, "host");
    lua_pop(L, 1);
    a3s_lua_state_push_readonly(L, -1, "a3s");
    lua_remove(L, -2);
}

/* The protected main: build the locked state, run the policy, steal its plan.
 * [-0, +0, e] */
static int rt_main(lua_State *L)
{
    rt *r = a3s_rt_get(L);
    luaL_checkstack(L, 32, NULL);

    /* Metatables: the plan draft and the DIR box. */
    a3s_plan_api_register(L);
    a3s_host_query_register(L);

    a3s_lua_state_open_libs(L); /* stack: G */
    int g = lua_gettop(L);
    a3s_host_query_push_ctx(L, r->ctx);
    lua_setfield(L, g, "ctx");
    push_api(L);
    lua_setfield(L, g, "a3s");
    a3s_lua_state_set_globals(L, g);

    a3s_plan_api_begin(L, r->src->path);

    /* The policy itself, in the first scope. */
    lua_newtable(L); /* require cache */
    int cache = lua_gettop(L);
    size_t len = strlen(r->src->text);
    char chunkname[PATH_MAX + 2];
    snprintf(chunkname, sizeof chunkname, "@%s", r->src->path);
    /* The build's compiled chunk for a shipped policy's text, else the text compiled. */
    if (!a3s_builtin_load(L, r->src->text, len, chunkname) &&
        luaL_loadbufferx(L, r->src->text, len, chunkname, "t") != LUA_OK)
        return lua_error(L);
    a3s_lua_state_set_chunk_env(L, -1, cache);
    lua_call(L, 0, 1);
    if (!(r->result = a3s_plan_api_steal(L, -1))) {
        lua_pushfstring(L, "policy must return a plan (from a3s.plan or a3s.extend), got %s",
                        luaL_typename(L, -1));
        return lua_error(L);
    }
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
        int rc = a3s_lua_state_read_file(path, NULL, &text, &len, err);
        if (rc < 0)
            return -1;
        if (rc > 0)
            return a3s_fail_errno(err, A3S_ERR_POLICY, ENOENT, "policy file %s", policy);
    } else {
        /* A name: letters, digits, '_', '-', '.' (not leading: no hidden files or "..").*/
        if (policy[0] == '.' || !a3s_plan_api_name_ok(policy, n))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "policy name '%s' must match [A-Za-z0-9_-][A-Za-z0-9_.-]* (or give "
                            "a file path)",
                            policy);
        int rc = 1;
        for (size_t i = 0; rc == 1 && search_path && search_path[i]; i++) {
            int w = snprintf(path, sizeof path, "%s/%s.lua", search_path[i], policy);
            if (w < 0 || (size_t)w >= sizeof path)
                continue;
            rc = a3s_lua_state_read_file(path, NULL, &text, &len, err);
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

static a3s_plan *eval(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                      a3s_policy_facts *facts, a3s_error *err)
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

    rt r = {.limit = RT_MEM_LIMIT, .src = src, .ctx = ctx, .start_ms = a3s_now_ms(),
            .facts = facts};
    /* What the host's mounts were when the policy looked: a session keeps that view
     * (its mounts do not propagate), and the backend finds a rule's optional target on
     * the host, so a session whose host's mounts changed cannot trust either. */
    if (facts && !ctx->neutral) {
        char hex[17];
        if (!(r.mounts = a3s_aliases_table(NULL))) {
            a3s_fail_errno(err, A3S_ERR_POLICY, errno, "policy %s: the mount table",
                           src->path);
            return NULL;
        }
        a3s_aliases_table_digest(r.mounts, hex);
        a3s_facts_add(facts, A3S_FACT_MOUNT_TABLE, "/", 1, hex, 16, true);
    }
    lua_State *L = a3s_lua_state_new(&r);
    if (!L) {
        a3s_fail(err, A3S_ERR_INTERNAL, "policy %s: cannot create a Lua state (out of memory)",
                 src->path);
        return NULL;
    }
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

    a3s_lua_state_close(L); /* no policy code runs after evaluation */
    a3s_aliases_table_free(r.mounts);

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

a3s_plan *a3s_policy_eval(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                          a3s_error *err)
{
    return eval(src, ctx, NULL, err);
}

static a3s_plan *eval_facts(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                            a3s_policy_facts **facts, a3s_error *err)
{
    *facts = NULL;
    a3s_policy_facts *f = a3s_facts_new();
    if (!f) {
        a3s_fail(err, A3S_ERR_INTERNAL, "policy: out of memory");
        return NULL;
    }
    a3s_plan *p = eval(src, ctx, f, err);
    if (p)
        *facts = f;
    else
        a3s_facts_free(f);
    return p;
}

const a3s_policy_engine a3s_lua_policy_engine = {
    .name = "lua",
    .builtin_dir = A3S_BUILTIN_DIR,
    .resolve = a3s_policy_resolve,
    .eval = a3s_policy_eval,
    .eval_facts = eval_facts,
    .facts_check = a3s_facts_check,
    .facts_free = a3s_facts_free,
    .facts_encode = a3s_facts_encode,
    .facts_decode = a3s_facts_decode,
};
