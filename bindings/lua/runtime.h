/* Internal to bindings/lua: what the files of the Lua policy engine share.
 *   policy_runtime.c  resolve + eval (the seam of engine/policy.h), the protected main
 *   lua_state.c       the locked state: allocator, hook, libraries, proxies, load/require
 *   plan_api.c        the plan-builder API: the "a3s.Plan" draft and its builders
 *   host_query.c      what a policy may ask of the host: a3s.host and ctx
 * Nothing outside bindings/lua includes this header. */
#ifndef A3S_LUA_RUNTIME_H
#define A3S_LUA_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>

#include <lua.h>

#include "a3s_sandbox.h"
#include "plan.h"
#include "policy.h"

#define RT_MEM_LIMIT ((size_t)64 << 20) /* Lua heap + C plan, bytes */

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
    a3s_policy_facts *facts; /* what the evaluation reads is recorded here, or NULL */
    struct a3s_mount_table *mounts; /* read at the first a3s.host.aliases, then kept */
} rt;

static inline rt *a3s_rt_get(lua_State *L)
{
    void *ud = NULL;
    lua_getallocf(L, &ud);
    return ud;
}

/* [A-Za-z0-9_]: a character of module and plan names. */
static inline bool a3s_rt_is_name_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* ------------------------------------------------------------------ lua_state.c */

/* A fresh state whose allocator and instruction/clock hook account to r (which must
 * outlive it). NULL when out of memory. */
lua_State *a3s_lua_state_new(rt *r);
/* Close the state; no policy code runs from here on. */
void a3s_lua_state_close(lua_State *L);
/* Charge C memory the policy makes us allocate against the state's cap. [-0, +0, v] */
void a3s_lua_state_charge(lua_State *L, size_t n);
/* Read a policy or module file. 0 and *text (malloc'd); 1 when it does not exist; -1. */
int a3s_lua_state_read_file(const char *path, const char *guard, char **text, size_t *len,
                            a3s_error *err);
/* [A-Za-z0-9_]+(\.[A-Za-z0-9_]+)* */
bool a3s_lua_state_module_name_ok(const char *s, size_t len);
/* Find module `name` in the search path, load it in text mode and push the chunk.
 * [-0, +1, e] */
void a3s_lua_state_load_module(lua_State *L, const char *name, char *path_out,
                               size_t path_n);
/* Give a main chunk a fresh environment of the scope at cache_idx. [-0, +0, m] */
void a3s_lua_state_set_chunk_env(lua_State *L, int fn_idx, int cache_idx);
/* Push a read-only proxy for the table at idx. [-0, +1, m] */
void a3s_lua_state_push_readonly(lua_State *L, int idx, const char *what);
/* Argument checks. [-0, +0, v] */
const char *a3s_lua_state_check_str(lua_State *L, int arg, size_t *lenp);
const char *a3s_lua_state_check_abs(lua_State *L, int arg);
const char *a3s_lua_state_check_rule_path(lua_State *L, int arg);
/* Open the allowed libraries and push the shared globals. [-0, +1, m] */
void a3s_lua_state_open_libs(lua_State *L);
/* Make the table at g the globals and the fallback of every chunk environment.
 * [-0, +0, m] */
void a3s_lua_state_set_globals(lua_State *L, int g);

/* ------------------------------------------------------------------ plan_api.c */

/* [A-Za-z0-9_.-]{1,127} (the plan's name rule) */
bool a3s_plan_api_name_ok(const char *s, size_t len);
/* Register the metatable of the "a3s.Plan" draft. [-0, +0, m] */
void a3s_plan_api_register(lua_State *L);
/* Start the set of policies being evaluated with the one at path. [-0, +0, m] */
void a3s_plan_api_begin(lua_State *L, const char *path);
/* a3s.plan(name) and a3s.extend(base, name). */
int a3s_plan_api_new(lua_State *L);
int a3s_plan_api_extend(lua_State *L);
/* Take the plan of the open draft at idx (the draft keeps nothing); NULL when the value
 * is not an open draft. [-0, +0, -] */
a3s_plan *a3s_plan_api_steal(lua_State *L, int idx);

/* ------------------------------------------------------------------ host_query.c */

/* Register the metatable of the directory box. [-0, +0, m] */
void a3s_host_query_register(lua_State *L);
/* Push the a3s.host library (a plain table). [-0, +1, m] */
void a3s_host_query_push_lib(lua_State *L);
/* Push ctx, the read-only facts a policy may use. [-0, +1, m] */
void a3s_host_query_push_ctx(lua_State *L, const a3s_policy_ctx *c);

#endif
