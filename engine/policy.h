/* The policy seam: how the engine turns a policy name into a validated plan. The engine
 * knows no policy language; a policy engine (bindings/lua: a locked Lua state) resolves a
 * name or file into source text and evaluates it against a context. The composition root
 * (bindings/) hands one to a3s_sandbox_create. */
#ifndef A3S_POLICY_H
#define A3S_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "a3s_sandbox.h"
#include "plan.h"

/* What a policy may see of the host. */
typedef struct a3s_policy_ctx {
    const char *workspace, *scratch, *home, *tmp; /* canonical host roots */
    const char *const *host_env;                  /* "K=V", NULL-terminated */
    const char *const *search_path;               /* policy dirs, NULL-terminated */
    const char *platform;                         /* "linux" */
    /* No policy file or module is read from below this directory (the workspace, whose
     * files the command may have written), however its path was reached; may be NULL. */
    const char *guard;
    /* Neutral host: no environment, no PATH dirs, and every host query answers "absent".
     * The digest is computed from an evaluation against neutral roots in this mode, so
     * no fact of the real host can reach it. */
    bool neutral;
} a3s_policy_ctx;

/* A resolved policy: everything evaluation needs, read once. */
typedef struct a3s_policy_src {
    char *name; /* "baseline" or the file's basename without its suffix */
    char *path; /* resolved file path */
    char *text; /* file contents */
} a3s_policy_src;

void a3s_policy_src_free(a3s_policy_src *src);

/* What one evaluation read of the host and of policy files (the policy engine's own
 * record, opaque here), and whether it still holds. */
typedef struct a3s_policy_facts a3s_policy_facts;
enum { A3S_FACTS_HOLD = 0, A3S_FACTS_HOST = 1, A3S_FACTS_POLICY = 2, A3S_FACTS_MOUNTS = 3 };

typedef struct a3s_policy_engine {
    const char *name; /* "lua" */
    /* A search-path entry the engine's own resolve and reads understand (the shipped
     * policies built in), put after the installed directory, or NULL. */
    const char *builtin_dir;
    /* Resolve a name (looked up in search_path, in order) or a file, and read it.
     * A3S_ERR_POLICY (-1, err) when not found or unreadable. */
    int (*resolve)(const char *policy, const char *const *search_path, a3s_policy_src *out,
                   a3s_error *err);
    /* Evaluate src against ctx into a plan whose roots are set and which has passed
     * a3s_plan_validate (so it is frozen: see plan.h). NULL and err (A3S_ERR_POLICY) on
     * any failure. Nothing of the evaluation survives the call. */
    a3s_plan *(*eval)(const a3s_policy_src *src, const a3s_policy_ctx *ctx, a3s_error *err);
    /* eval, and what it read (*facts, owned by the caller: facts_free). While
     * facts_check answers A3S_FACTS_HOLD for the same src and ctx, evaluating again would
     * give the same plan: every host query is answered as before and every policy file
     * looked for is as it was. A3S_FACTS_HOST: a host fact changed (the policy itself did
     * not: its digest stands); A3S_FACTS_POLICY: a policy file looked for changed;
     * A3S_FACTS_MOUNTS: what it read of the mount table changed (and no policy file did):
     * a session, whose view of the host's mounts is the one it started with, cannot follow.
     * May be NULL (no such record: every run evaluates). */
    a3s_plan *(*eval_facts)(const a3s_policy_src *src, const a3s_policy_ctx *ctx,
                            a3s_policy_facts **facts, a3s_error *err);
    int (*facts_check)(const a3s_policy_facts *facts, const a3s_policy_ctx *ctx);
    void (*facts_free)(a3s_policy_facts *facts);
    /* The record as bytes (malloc'd; -1 when it has none) and back (NULL: not a record),
     * so that it can be kept between processes; a decoded record is only ever used
     * through facts_check. Either may be NULL: nothing is kept. */
    int (*facts_encode)(const a3s_policy_facts *facts, char **out, size_t *len);
    a3s_policy_facts *(*facts_decode)(const char *buf, size_t len);
} a3s_policy_engine;

#endif
