/* The locked Lua state that evaluates a policy into a plan (SPEC §4). No Lua survives
 * evaluation: the state is closed before this returns. */
#ifndef A3S_POLICY_RUNTIME_H
#define A3S_POLICY_RUNTIME_H

#include "a3s_sandbox.h"
#include "plan.h"

typedef struct a3s_policy_ctx {
    const char *workspace, *scratch, *home, *tmp; /* canonical host roots */
    const char *const *host_env;                  /* "K=V", NULL-terminated */
    const char *const *search_path;               /* policy dirs, NULL-terminated */
    const char *platform;                         /* "linux" */
    /* Neutral host: no environment, no PATH dirs, and every host query answers "absent".
     * The digest is computed from an evaluation against neutral roots in this mode, so
     * no fact of the real host can reach it. */
    bool neutral;
} a3s_policy_ctx;

typedef struct a3s_policy_src {
    char *name; /* "baseline" or the file's basename without .lua */
    char *path; /* resolved file path */
    char *text; /* file contents */
} a3s_policy_src;

/* Resolve NAME (looked up as NAME.lua in search_path, in order) or FILE (contains '/'
 * or ends with ".lua") and read it. A3S_ERR_POLICY if not found or unreadable. */
int a3s_policy_resolve(const char *policy, const char *const *search_path,
                       a3s_policy_src *out, a3s_error *err);
void a3s_policy_src_free(a3s_policy_src *src);

/* Evaluate the policy in a fresh locked state (instruction budget, memory cap, text-only
 * loads, no io/os/package/debug, require limited to search_path), copy the plan into C,
 * set its roots, validate it, close the state. NULL and err (A3S_ERR_POLICY, message
 * "policy FILE: ...") on any failure. */
a3s_plan *a3s_policy_eval(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                          a3s_error *err);

#endif
