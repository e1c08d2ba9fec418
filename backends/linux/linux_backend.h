/* The linux-bwrap backend (backend.h) and what the process-host backend shares with it.
 * The composition root makes one with a3s_linux_backend_new. */
#ifndef A3S_LINUX_BACKEND_H
#define A3S_LINUX_BACKEND_H

#include <stdbool.h>

#include "a3s_sandbox.h"
#include "backend.h"
#include "cgroup.h"
#include "rootid.h"
#include "runres.h"
#include "warm.h"

typedef struct a3s_linux_backend {
    a3s_backend base;
    a3s_backend_host h; /* borrowed from the sandbox */
    char *bwrap, *shell;
    /* The helper programs: by default their embedded images (helpers.h), made into
     * sealed memfds on first use and kept for every later run of this object; a path
     * only when the caller named one (A3S_SANDBOX_LAUNCHER, _RELAY, _MEDIATOR). */
    char *launcher;     /* a3s-sandbox-launch given by path, or NULL */
    char *relay;        /* a3s-sandbox-relay given by path, or NULL */
    char *relay_why;    /* the relay given cannot be used: why (grants are refused) */
    char *mediator;     /* a3s-sandbox-mediator (host side) given by path, or NULL */
    char *mediator_why; /* the mediator given cannot be used: why (grants are refused) */
    int image[3];       /* the embedded images' memfds (by a3s_helper), or -1 */
    char *why_unusable; /* bubblewrap or the launcher cannot be used, or NULL */
    /* Root callers: the command runs under an unprivileged host id (rootid.h). */
    a3s_rootid rootid;
    bool rootid_tried;
    char *rootid_error;
    a3s_linux_quota quota;
} a3s_linux_backend;

struct a3s_backend_run {
    a3s_runres res;
    const a3s_plan *plan;
    a3s_strv env;   /* the command's environment (with the relay's proxies when mediated) */
    a3s_strv args;  /* bwrap options, passed with --args */
    a3s_strv cmd;   /* "--", launcher, ... on bwrap's real argv */
    a3s_strv host;  /* the setup step's mounts outside the workspace, as bwrap options */
    a3s_strv setup; /* setup records (protocol.h) */
    int ws_mnt, scratch_mnt; /* mapped identity: idmapped detached mounts */
    bool mapped;
    char *identity_note; /* a described plan: why the mapped identity is unavailable */
    bool mediated; /* grants: the relay runs first, the mediator outside */
    const a3s_grant *grants;
    size_t ngrants;
    /* process-host only: the argv it runs (bash -c ...), and where it starts (the
     * workspace joined with the request's cwd; NULL: the workspace) */
    char **host_argv;
    char *host_cwd;
    int host_cwd_fd; /* process-host: that directory, opened beneath the workspace, or -1 */
    a3s_backend_session *session; /* a command of this session (session.c), or NULL */
    a3s_warm ahead;    /* its sandbox, started while it was prepared (ahead.h) */
    /* A session's command: its mount namespace, held from its launcher's "R" (warm.h) to
     * run_close, so that its teardown follows the run's end instead of delaying it. */
    int held_mnt;
    /* ... and its launcher's pidfd, when the command's end came first (exec.h: "Z"):
     * reaped at run_close. */
    int late_pidfd;
    bool ahead_mapped; /* ... with the mapped identity */
};

/* Make the linux-bwrap backend. Fails only for what no run could do without (trusted
 * bash, a workspace holding the state directory); an unusable bubblewrap or launcher
 * leaves it made, with ops->unusable saying why. */
int a3s_linux_backend_new(const a3s_backend_host *h, const char *bwrap, a3s_backend **out,
                          a3s_error *err);

/* The sealed memfd of embedded helper h (helpers.h), made on first use and kept: the
 * backend's own fd, not to be closed by the caller. -1 with err. */
int a3s_linux_image(a3s_linux_backend *be, int h, a3s_error *err);

/* One run's object, its host resources opened (backend.h run_open), for either backend;
 * and what the scan asks of it (pins). */
int a3s_linux_run_new(const char *tmp, bool sweep, a3s_backend_run **out, const char **scratch,
                      a3s_error *err);
const a3s_scan_hooks *a3s_linux_run_scan_hooks(a3s_backend_run *run);

/* backend_exec.c: run a prepared run (backend.h run_exec). */
int a3s_linux_run_exec(a3s_backend *be, a3s_backend_run *run, const a3s_run_io *io,
                       a3s_outcome *o, a3s_error *err);

/* Nothing of the command ran: the setup failure as err (always -1). */
int a3s_linux_never_started(const a3s_outcome *o, a3s_error *err);

/* session.c: sessions (backend.h session_open, session_close), and running one
 * prepared command in one (from a3s_linux_run_exec). */
int a3s_linux_session_open(a3s_backend *be, a3s_backend_run *run, a3s_backend_session **out,
                           a3s_error *err);
void a3s_linux_session_close(a3s_backend *be, a3s_backend_session *s);
int a3s_linux_session_warm(a3s_backend *be, a3s_backend_session *s, a3s_error *err);
void a3s_linux_session_unwarm(a3s_backend *be, a3s_backend_session *s);
int a3s_linux_session_exec(a3s_linux_backend *be, a3s_backend_run *run, const a3s_run_io *io,
                           a3s_outcome *o, a3s_error *err);

/* Shared with the process-host backend. */
const char *a3s_linux_getenv(const a3s_backend_host *h, const char *name);
int a3s_linux_check_state_root(const a3s_backend_host *h, a3s_error *err);
/* plancheck.c: backend.h plan_check for this host (h: the workspace's fd for its paths). */
int a3s_linux_plan_check(const a3s_backend_host *h, const a3s_plan *p, bool host,
                         a3s_error *err);
/* The request's working directory (relative, its spelling checked by the engine) must
 * be a directory below the workspace, symbolic links followed only while they stay
 * there: checked on the host before anything starts, so the caller gets a clear
 * refusal. Returns 0, or -1 with A3S_ERR_INVALID. */
int a3s_linux_check_cwd(int ws_fd, const char *cwd, a3s_error *err);
/* The same directory opened (O_PATH, beneath the workspace): the fd, or -1 with err. */
int a3s_linux_open_cwd(int ws_fd, const char *cwd, a3s_error *err);
/* The supervisor's launch for io (deadline, budget, limits, callbacks, mirror). */
void a3s_linux_launch_init(a3s_launch *l, const a3s_plan *p, const a3s_run_io *io,
                           const char *cwd, a3s_runres *res);

#endif
