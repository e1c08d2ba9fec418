/* The Lua policy engine (the policy seam of engine/policy.h): a locked Lua state that
 * evaluates a policy into a plan (policies/README.md). No Lua survives evaluation: the state is
 * closed before eval returns. */
#ifndef A3S_POLICY_RUNTIME_H
#define A3S_POLICY_RUNTIME_H

#include "a3s_sandbox.h"
#include "plan.h"
#include "policy.h"

/* The engine the composition root hands to a3s_sandbox_create. */
extern const a3s_policy_engine a3s_lua_policy_engine;

/* Resolve NAME (looked up as NAME.lua in search_path, in order) or FILE (contains '/'
 * or ends with ".lua") and read it. A3S_ERR_POLICY if not found or unreadable. */
int a3s_policy_resolve(const char *policy, const char *const *search_path,
                       a3s_policy_src *out, a3s_error *err);

/* Evaluate the policy in a fresh locked state (instruction budget, memory cap, text-only
 * loads, no io/os/package/debug, require limited to search_path), copy the plan into C,
 * set its roots, validate it, close the state. NULL and err (A3S_ERR_POLICY, message
 * "policy FILE: ...") on any failure. */
a3s_plan *a3s_policy_eval(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                          a3s_error *err);

#endif
