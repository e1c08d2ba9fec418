/* The backend seam: what enforces a frozen plan on this host. The engine runs one
 * pipeline (policy -> frozen plan -> scan -> backend prepare -> supervise -> result) and
 * reaches the kernel only through these operations. Backends: backends/linux (bubblewrap
 * namespaces, seccomp, the trusted setup step, cgroups, the pidfd supervisor),
 * backends/host (process-host: no local boundary, opt-in and loud), backends/macos
 * (macos-seatbelt: a Seatbelt profile; runs on macOS only). The composition root
 * (bindings/) picks one and hands it to the sandbox. */
#ifndef A3S_BACKEND_H
#define A3S_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include <jansson.h>

#include "a3s_sandbox.h"
#include "capture.h"
#include "grant.h"
#include "plan.h"
#include "scan.h"
#include "util.h"

/* What one run produced, as the engine needs it for the result. */
typedef struct a3s_outcome {
    a3s_capture *cap;   /* owned by the caller after return (a3s_capture_free) */
    int wait_status;    /* of the top process (waitid-derived, as from waitpid) */
    bool timed_out;     /* the deadline killed the tree */
    bool aborted;       /* the observer or cancel_fd asked to stop; the tree was killed */
    bool started;       /* the command started */
    bool ns_started;    /* the boundary's namespaces were created */
    int reported_exit;  /* the boundary's own report of the exit code, or -1 */
    /* The command's exact wait status as the launcher reported it, when it did. */
    bool has_command_status;
    int command_status;
    bool output_closed;   /* a mirror's reader went away: the tree was killed */
    bool setup_timed_out; /* the setup bound passed before the command started */
    /* Mirrored bytes the reader had not taken when the tree was gone (malloc'd, owned by
     * the caller; NULL: none), of stream 1 or 2. */
    char *mirror_pending;
    size_t mirror_pending_len;
    int mirror_pending_stream;
    /* Streams not mirrored live (a pipe or terminal that could not be reopened
     * non-blocking): the caller writes their whole rendering once the tree is gone. */
    bool mirror_deferred[2];
    /* The launcher said it could not start the command: it never ran. */
    bool launch_failed;
    int launch_errno;
    /* What the boundary wrote before the command started (its own error message);
     * NUL-terminated, truncated to fit. */
    char setup_diag[4096];
    size_t setup_diag_len;
    uint64_t duration_ms;
    /* Filled by the backend's run_exec, after the tree is gone: */
    uint64_t oom_kills;     /* processes killed by the memory quota */
    uint64_t pids_max;      /* forks refused by the process quota */
    bool quota_refused;     /* a quota this host cannot enforce refused the run */
    char *network_denials;  /* the mediator's records, one JSON object per line (malloc'd) */
    const char *identity;   /* who the command ran as: "caller", "mapped", "host-root" */
} a3s_outcome;

enum a3s_quota { A3S_QUOTA_PIDS = 0, A3S_QUOTA_MEMORY, A3S_QUOTA_CPU, A3S_QUOTA_COUNT };

/* What this host can enforce of the quotas that need kernel support. */
typedef struct a3s_quota_caps {
    bool can[A3S_QUOTA_COUNT];
    char via[A3S_QUOTA_COUNT][64];
    char why_not[A3S_QUOTA_COUNT][256];
} a3s_quota_caps;

/* What the sandbox knows of the host, given to a backend when it is made. Borrowed: the
 * sandbox outlives its backend. */
typedef struct a3s_backend_host {
    const char *workspace; /* canonical */
    int ws_fd;             /* the workspace, opened once */
    struct stat ws_st;
    const char *tmp; /* canonical temporary directory (scratch dirs go there) */
    const char *const *host_env;
    bool allow_host_root; /* root callers: host root where no unprivileged id can be used */
} a3s_backend_host;

/* A session's warm boundary (backend-specific), made by session_open. */
typedef struct a3s_backend_session a3s_backend_session;

/* One run, for prepare. Everything is borrowed for the run's lifetime. */
typedef struct a3s_run_spec {
    const a3s_plan *plan;         /* validated, frozen */
    const a3s_scan_result *scan;  /* the workspace facts, beside the plan */
    const a3s_strv *env;          /* the composed environment of the command */
    char *const *argv;            /* argv form, or NULL */
    const char *shell_command;    /* bash -c form, or NULL; neither: a probe */
    /* Where the command starts, relative to the workspace (a3s_exec_request.cwd, its
     * spelling checked: not absolute, no ".."), or NULL: the workspace. The backend
     * resolves it below the workspace and refuses the run when it is not a directory. */
    const char *cwd;
    const a3s_grant *grants;      /* mediated network when ngrants > 0 */
    size_t ngrants;
    bool pin; /* false: a read-only question (the plan): nothing is pinned */
    /* A command of this session (its plan is the session's), or NULL: a fresh run. */
    a3s_backend_session *session;
} a3s_run_spec;

/* One run's inputs to supervision. */
typedef struct a3s_run_io {
    const char *id; /* the execution id */
    int stdin_fd;
    const char *stdin_data;
    size_t stdin_len;
    int64_t timeout_ms;
    a3s_output_fn on_output;
    void *output_ud;
    int cancel_fd;
    bool mirror;
    int mirror_fd[2];
    int tty_fd; /* a pty master (a3s_exec_request.tty_fd), or -1 */
    int64_t *deadline_out; /* a3s_exec_request.deadline_out: written when the timer is set */
} a3s_run_io;

typedef struct a3s_backend a3s_backend;
typedef struct a3s_backend_run a3s_backend_run;

/* Runs a shell command in a sandbox granted exactly one origin and gives back its stdout
 * (malloc'd) or NULL: how a backend proves its mediation live (capabilities). */
typedef char *(*a3s_granted_run_fn)(void *ud, const char *shell_command, const a3s_grant *g);

typedef struct a3s_backend_ops {
    const char *name; /* "linux-bwrap", "macos-seatbelt", "process-host" */
    bool boundary;    /* false: no local boundary (process-host) */
    /* Capability keys of the capabilities report this backend never provides, even when
     * usable (NULL-terminated, or NULL: none), so that the report claims nothing the
     * backend cannot do. */
    const char *const *not_provided;
    /* Why this backend cannot run commands here (a missing or unusable program), or
     * NULL. Plans can still be described. */
    const char *(*unusable)(const a3s_backend *be);
    /* The boundary's main program (for reports), or NULL. */
    const char *(*program)(const a3s_backend *be);
    /* Open one run: clean up after dead runs (sweep: a session's commands leave that to
     * its opening), record and make the scratch dir (*scratch, owned by the run). */
    int (*run_open)(a3s_backend *be, a3s_backend_run **out, const char **scratch, bool sweep,
                    a3s_error *err);
    /* A run that will execute, just opened: start what of its boundary needs no plan yet,
     * while the engine evaluates the policy and prepares it (best effort, may be NULL).
     * Nothing of the command runs before run_exec; run_close releases what was not used. */
    void (*run_ahead)(a3s_backend *be, a3s_backend_run *run);
    /* Refuse what this backend could not enforce of a frozen plan, before anything of a
     * run is made, so that checking a policy and running it refuse the same things: the
     * rules that need no host (syscall names the filter compiler knows) and, when host,
     * also the plan's paths on this host (a non-optional path that does not exist).
     * A3S_ERR_POLICY naming the rule and its provenance. */
    int (*plan_check)(a3s_backend *be, const a3s_plan *p, bool host, a3s_error *err);
    /* What the workspace scan asks of this backend for this run (may be NULL). */
    const a3s_scan_hooks *(*scan_hooks)(a3s_backend_run *run);
    /* Turn the frozen plan and the scan's facts into what is launched (pins, mounts,
     * the boundary's arguments). Never changes the plan. */
    int (*run_prepare)(a3s_backend *be, a3s_backend_run *run, const a3s_run_spec *spec,
                       a3s_error *err);
    /* The members the plan JSON shows for this backend (e.g. bwrap_argv,
     * seccomp_filter), added to extra; -1 on ENOMEM. */
    int (*run_describe)(a3s_backend *be, a3s_backend_run *run, json_t *extra);
    /* Run the prepared command to completion. 0 with o filled when it ran (or was
     * stopped by its caller: o->aborted); -1 with err when nothing of it ran. */
    int (*run_exec)(a3s_backend *be, a3s_backend_run *run, const a3s_run_io *io,
                    a3s_outcome *o, a3s_error *err);
    /* Release everything of the run (pins, scratch dir, records). NULL is a no-op. */
    void (*run_close)(a3s_backend *be, a3s_backend_run *run);
    /* Optional: release what the workspace keeps of the run (its pins, the workspace
     * root's mode and ACLs restored, a quota cgroup) ahead of run_close, for a run whose
     * close is put off past its answer (a3s_session_linger). */
    void (*run_settle)(a3s_backend *be, a3s_backend_run *run);
    /* Quotas this host can enforce (probed once). */
    const a3s_quota_caps *(*quota_caps)(a3s_backend *be);
    /* Mediated network proven live, through run (may be NULL: no mediation). */
    void (*probe_mediation)(a3s_backend *be, a3s_granted_run_fn run, void *ud, bool *http,
                            bool *socks);
    /* Sessions (NULL: this backend has none). session_open makes the warm boundary of a
     * prepared run (the session's first: its plan, pins and scratch path stay the
     * session's), whose later runs are prepared with spec.session and run by run_exec in
     * it. session_close releases it; NULL is a no-op. */
    int (*session_open)(a3s_backend *be, a3s_backend_run *run, a3s_backend_session **out,
                        a3s_error *err);
    void (*session_close)(a3s_backend *be, a3s_backend_session *s);
    /* Prepare what the session's next command in this process needs ahead (NULL, or -1
     * with err: nothing is, and the command prepares it all as before). */
    int (*session_warm)(a3s_backend *be, a3s_backend_session *s, a3s_error *err);
    /* Release what session_warm prepared, in this process (NULL: nothing to release). */
    void (*session_unwarm)(a3s_backend *be, a3s_backend_session *s);
    /* A directory for what the engine keeps between runs (the policy digests): the
     * caller's alone and never writable by a command. Returns its fd (O_CLOEXEC), or -1:
     * nothing is kept (a cache miss each time). NULL: no such directory. */
    int (*cache_open)(a3s_backend *be);
    void (*free)(a3s_backend *be);
} a3s_backend_ops;

/* Every backend starts with this (its own state follows). */
struct a3s_backend {
    const a3s_backend_ops *ops;
};

#endif
