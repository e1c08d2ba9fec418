/* What the composition root (bindings/) uses to put a sandbox together: the engine with
 * a policy engine (policy.h), then a backend (backend.h). */
#ifndef A3S_ENGINE_SANDBOX_H
#define A3S_ENGINE_SANDBOX_H

#include "a3s_sandbox.h"
#include "backend.h"
#include "policy.h"

/* The sandbox without a backend: workspace opened, host roots found, policy resolved
 * (not evaluated: see a3s_sandbox_evaluate). installed_policies: this installation's
 * policy directory, or NULL. */
a3s_sandbox *a3s_sandbox_create(const a3s_options *opts, const a3s_policy_engine *policy,
                                const char *installed_policies, a3s_error *err);
/* The running program must never be what a command rewrites for the next run. Walks
 * path (relative: from the current directory) as the kernel would, following links; each
 * entry the walk steps into from the workspace (by identity) is protected in every run
 * (read-only and a mount point; pinned when missing; a directory unless it is the last
 * component and !final_dir). Paths that do not exist are walked as far as they do. */
int a3s_sandbox_guard_path(a3s_sandbox *sb, const char *path, bool final_dir, a3s_error *err);
/* When the directory of image (canonical) is the workspace itself, every run is refused:
 * what is installed beside the program would be the command's to replace. */
int a3s_sandbox_guard_home_dir(a3s_sandbox *sb, const char *image, a3s_error *err);
/* Whether a3s_sandbox_guard_path protected anything (process-host cannot: refuse). */
bool a3s_sandbox_guarded(const a3s_sandbox *sb);
/* What a backend is given of the host (borrowed from sb). */
void a3s_sandbox_host(const a3s_sandbox *sb, a3s_backend_host *h);
/* The host environment variable name, or NULL. */
const char *a3s_sandbox_getenv(const a3s_sandbox *sb, const char *name);
/* Hand the sandbox its backend (owned from now on; a previous one is freed).
 * fallback_reason: why the native boundary is not used (process-host), or NULL. */
int a3s_sandbox_use_backend(a3s_sandbox *sb, a3s_backend *be, const char *fallback_reason,
                            a3s_error *err);
/* Evaluate the policy for this host and have the backend check the plan (backend.h
 * plan_check; host: also its paths on this host). What a3s_sandbox_new does once, unless
 * opts->defer_policy, so that a broken policy fails there. 0, or -1 with err. */
int a3s_sandbox_evaluate(a3s_sandbox *sb, bool host, a3s_error *err);
/* Prepare the session's next command in this process ahead: its run (record, scratch
 * dir) and, linux-bwrap, its launcher, in the session's namespaces and its own, waiting
 * for it. The next a3s_session_exec here takes the run, and the launcher where that
 * command's plan is the session's and no quota cgroup applies (it starts its own
 * otherwise). For a process that serves one command and is idle until then (the CLI's
 * spare session worker). 0, or -1 with err: the launcher is not prepared. */
int a3s_session_warm(a3s_session *s, a3s_error *err);
/* Release what a3s_session_warm prepared in this process (its launcher stopped and
 * reaped, its run released), before a process that prepared it leaves without a
 * command. */
void a3s_session_unwarm(a3s_session *s);
/* on: each command's run is released at a3s_session_release (or the next exec, or
 * close) instead of before its exec returns: its scratch dir and run record stay, and
 * the command's mount namespace is torn down then. For a process that answers its caller
 * first (the CLI's session worker); a command whose output is still to be drained to its
 * reader is released at once all the same. */
void a3s_session_linger(a3s_session *s, bool on);
void a3s_session_release(a3s_session *s);

#endif
