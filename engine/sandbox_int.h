/* The sandbox object, shared by the engine's files (sandbox.c: construction; approval.c:
 * digests and grants; run.c: one execution; report.c: plan, probe, capabilities). Not
 * for backends or bindings: they see the public API, policy.h and backend.h. */
#ifndef A3S_SANDBOX_INT_H
#define A3S_SANDBOX_INT_H

#include <stdbool.h>
#include <sys/stat.h>

#include "a3s_sandbox.h"
#include "backend.h"
#include "grant.h"
#include "plan.h"
#include "policy.h"
#include "sandbox.h"
#include "util.h"

/* Neutral roots of the digest's evaluation (approval.c). */
#define A3S_NEUTRAL "/a3s-sandbox-neutral"

struct a3s_sandbox {
    char *workspace, *home, *tmp;
    int ws_fd; /* the workspace, opened once (wspath.h): every later use goes through it */
    struct stat ws_st;
    a3s_strv approved_broaden; /* broadening roots of the neutral evaluation (the digest's) */
    bool allow_host_root;
    char digest[65]; /* of the current policy, computed once; "" until then */
    const a3s_policy_engine *policy;
    a3s_policy_src src;
    a3s_strv search_path;
    /* What the policy and its search path were made from (a3s_sandbox_roots_hold). */
    char *policy_spec, *installed_policies;
    a3s_strv policy_path;
    a3s_strv host_env;
    a3s_backend *backend; /* owned; NULL until the composition root sets one */
    char *fallback_reason; /* process-host: why the native boundary is not used */
    char *audit_path;
    a3s_audit_fn audit_fn;
    void *audit_ud;
    a3s_grant *grants; /* sorted by a3s_grant_cmp, distinct */
    size_t ngrants;
    /* Why every run here is refused (the workspace is HOME), or NULL: policy questions
     * and the fixed probe command still work. */
    char *ws_refusal;
    bool probing; /* the probe's own run (report.c) */
    int sessions; /* open sessions (session.c): the policy cannot be replaced under them */
    /* Top-level workspace entries protected beyond the policy's (the running program's
     * image lies there): names for the scan (scan.h also_dirs/also_files). */
    a3s_strv also_dirs, also_files;
};

/* Whether the workspace is path (canonicalized) or one of its ancestors, by identity. */
bool a3s_sandbox_ws_holds(const a3s_sandbox *sb, const char *path);

/* A session's command: the host roots, the policy search path and the policy file
 * resolve as when the sandbox was made. Else -1, A3S_ERR_POLICY: that changed. */
int a3s_sandbox_roots_hold(a3s_sandbox *sb, a3s_error *err);

/* Evaluate the current policy for a run whose scratch dir is `scratch`. */
a3s_plan *a3s_sandbox_compile(a3s_sandbox *sb, const char *scratch, a3s_error *err);
/* The same, and what the evaluation read (*facts: NULL when the policy engine keeps no
 * such record); whether all of it still holds (policy.h A3S_FACTS_*). */
a3s_plan *a3s_sandbox_compile_facts(a3s_sandbox *sb, const char *scratch,
                                    a3s_policy_facts **facts, a3s_error *err);
int a3s_sandbox_facts_check(const a3s_sandbox *sb, const char *scratch,
                            const a3s_policy_facts *facts);

/* The backend's plan_check of p (0 without a backend). */
int a3s_sandbox_plan_check(a3s_sandbox *sb, const a3s_plan *p, bool host, a3s_error *err);

/* approval.c */
int a3s_sandbox_base_digest(a3s_sandbox *sb, char out[65], a3s_error *err);
int a3s_sandbox_policy_digest(a3s_sandbox *sb, char out[65], a3s_error *err);
int a3s_sandbox_check_broadening(a3s_sandbox *sb, const a3s_plan *p, a3s_error *err);
/* The grants as [{host, port[, policy_digest]}...] (digest NULL: left out); NULL on
 * ENOMEM. */
json_t *a3s_sandbox_grants_json(const a3s_sandbox *sb, const char *digest);

/* A session's part in its runs (session.c): the plan evaluated when it opened, its
 * digest, the backend's warm boundary. */
typedef struct a3s_session_ctx {
    const a3s_plan *plan; /* as evaluated when it opened: its scratch path and network */
    char digest[65];
    a3s_backend_session *backend;
    /* What that evaluation read: while all of it holds, a command's plan is that one. */
    a3s_policy_facts *facts;
    /* linger: a command's run (its record, scratch dir, the backend's holds) is released
     * at a3s_session_release, not before its exec returns (lingering until then). */
    bool linger;
    a3s_backend_run *lingering;
    /* The next command's run (its record and scratch dir), opened ahead in this process
     * (a3s_session_warm), or NULL. */
    a3s_backend_run *spare_run;
    const char *spare_scratch; /* owned by spare_run */
} a3s_session_ctx;

/* run.c: one prepared run (policy -> frozen plan -> scan -> backend prepare). */
typedef struct a3s_prepared {
    a3s_backend_run *run;
    const char *scratch; /* owned by run */
    a3s_plan *plan;      /* frozen */
    bool plan_borrowed;  /* the session's (its facts held): not freed with the run */
    a3s_scan_result scan;
    a3s_strv env;
    char digest[65];
} a3s_prepared;

int a3s_sandbox_prepare(a3s_sandbox *sb, const a3s_exec_request *req, bool pin,
                        a3s_prepared *pp, a3s_error *err);
/* The same, also recording what the evaluation read (a session's first run). */
int a3s_sandbox_prepare_facts(a3s_sandbox *sb, const a3s_exec_request *req, bool pin,
                              a3s_policy_facts **facts, a3s_prepared *pp, a3s_error *err);
void a3s_sandbox_prepared_free(a3s_sandbox *sb, a3s_prepared *pp);
/* One execution (a3s_sandbox_exec), in a session when sess is not NULL. */
int a3s_sandbox_exec_in(a3s_sandbox *sb, a3s_session_ctx *sess,
                        const a3s_exec_request *req, a3s_result *r, a3s_error *err);

#endif
