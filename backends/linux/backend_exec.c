/* Running a prepared linux-bwrap run: the quota cgroup, the seccomp filters, the
 * mediator for grants, bubblewrap started under the supervisor (exec.h), and what went
 * wrong when the command never started. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "a3s_seccomp.h"
#include "ahead.h"
#include "bwrap.h"
#include "helpers.h"
#include "linux_backend.h"
#include "medproc.h"
#include "protocol.h"
#include "trace.h"

/* Setting up the sandbox (bwrap, the trusted setup step) must end within this; the
 * command's deadline counts from its start. */
#define A3S_SETUP_LIMIT_MS 10000

void a3s_linux_launch_init(a3s_launch *l, const a3s_plan *p, const a3s_run_io *io,
                           const char *cwd, a3s_runres *res)
{
    *l = (a3s_launch){
        .stdin_fd = io->stdin_fd,
        .stdin_data = io->stdin_data,
        .stdin_len = io->stdin_len,
        .started_fd = -1,
        .status_fd = -1,
        .timeout_ms = io->timeout_ms,
        .deadline_out = io->deadline_out,
        .output_budget = (size_t)p->limits.output_bytes,
        .nofile = p->limits.nofile,
        .core_bytes = p->limits.core_bytes,
        .fsize = p->limits.file_size_bytes,
        .on_output = io->on_output,
        .output_ud = io->output_ud,
        .cancel_fd = io->cancel_fd,
        .cwd = cwd,
        .mirror = io->mirror,
        .mirror_fd = {io->mirror ? io->mirror_fd[0] : -1, io->mirror ? io->mirror_fd[1] : -1},
        .tty = io->tty_fd >= 0,
        .tty_fd = io->tty_fd,
        .on_pid = a3s_runres_record_pid,
        .pid_ud = res->rec,
    };
}

/* The filter of a mediated run: the plan's, with the socket families AF_INET and
 * AF_INET6 only (AF_UNIX removed whatever the policy said). The plan is not touched:
 * the filter is exported from a copy. */
static int export_mediated_filter(const a3s_seccomp_plan *sp, a3s_error *err)
{
    int fams[64];
    size_t n = 0;
    for (size_t i = 0; i < sp->nsocket_allow && n < 62; i++)
        if (sp->socket_allow[i] != AF_UNIX && sp->socket_allow[i] != AF_INET &&
            sp->socket_allow[i] != AF_INET6)
            fams[n++] = sp->socket_allow[i];
    fams[n++] = AF_INET;
    fams[n++] = AF_INET6;
    a3s_seccomp_plan copy = *sp;
    copy.socket_allow = fams;
    copy.nsocket_allow = copy.capsocket_allow = n;
    return a3s_seccomp_export(&copy, err);
}

/* The host-side mediator of a mediated run: the program a3s-sandbox-mediator, spawned
 * (medproc.h), never a fork of this process. */
static int start_mediator(a3s_linux_backend *be, a3s_backend_run *run, int *relay_end,
                          a3s_medproc *m, a3s_error *err)
{
    *m = (a3s_medproc)A3S_MEDPROC_NONE;
    if (be->mediator_why)
        return a3s_fail(err, A3S_ERR_SETUP, "network grants need a3s-sandbox-mediator, which "
                        "cannot be used (set A3S_SANDBOX_MEDIATOR): %s", be->mediator_why);
    /* The embedded image by default: posix_spawn executes its sealed memfd by the path
     * that names the fd (CLOEXEC: gone in the mediator once it runs). */
    char path[32];
    if (!be->mediator) {
        int fd = a3s_linux_image(be, A3S_HELPER_MEDIATOR, err);
        if (fd < 0)
            return -1;
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    return a3s_medproc_start(be->mediator ? be->mediator : path, run->grants, run->ngrants,
                             be->h.host_env, relay_end, m, err);
}

/* A copy of embedded helper h's sealed memfd for one run (a3s_exec_run consumes the fds
 * it passes on; the backend keeps its own), when wanted; *fd stays -1 otherwise. */
static int image_fd(a3s_linux_backend *be, bool wanted, a3s_helper h, int *fd, a3s_error *err)
{
    if (!wanted)
        return 0;
    int img = a3s_linux_image(be, h, err);
    if (img < 0)
        return -1;
    if ((*fd = fcntl(img, F_DUPFD_CLOEXEC, 0)) < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "%s: dup", a3s_helpers_name(h));
    return 0;
}

/* The plan's resource limits are set again inside (its "limit" records), where they can
 * only be lowered: one above the caller's hard limit is set by the supervisor before
 * bubblewrap starts (exec.c), in a sandbox started for the run. */
static bool limits_reachable(const a3s_launch *l)
{
    const struct {
        int res;
        bool set;
        int64_t v;
    } lim[] = {{RLIMIT_NOFILE, l->nofile > 0, l->nofile},
               {RLIMIT_CORE, l->core_bytes >= 0, l->core_bytes},
               {RLIMIT_FSIZE, l->fsize > 0, l->fsize}};
    for (size_t i = 0; i < sizeof lim / sizeof *lim; i++) {
        struct rlimit r;
        if (lim[i].set && (getrlimit(lim[i].res, &r) < 0 ||
                           (r.rlim_max != RLIM_INFINITY && (rlim_t)lim[i].v > r.rlim_max)))
            return false;
    }
    return true;
}

/* The sandbox started ahead (ahead.h) takes the run when it is the boundary the run
 * needs: bubblewrap's options equal but for the environment, which its launcher gets
 * with the command. It holds bwrap's options, status pipe, the launcher's image and the
 * user namespace already; the rest is handed over (warm.h). Otherwise it is discarded
 * now, and bubblewrap is started for the run as without it (so it is too when the
 * handover fails: exec.c). */
static void use_ahead(a3s_backend_run *run, a3s_launch *l)
{
    bool fits = run->ahead.pid > 0 && !run->mediated && l->ncgroup_fds == 0 && !l->tty &&
                run->mapped == run->ahead_mapped &&
                a3s_ahead_args_fit(&run->args, run->ahead_mapped) && limits_reachable(l);
    if (!fits) {
        a3s_warm_discard(&run->ahead);
        return;
    }
    for (size_t i = 0; i < l->nkeep; i++) {
        int t = l->keep[i].target;
        l->keep[i].held = t == A3S_FD_ARGS || t == A3S_FD_STATUS ||
                          t == A3S_FD_LAUNCHER_IMAGE || t == A3S_FD_USERNS;
    }
    l->warm = &run->ahead;
    l->warm_argv = run->cmd.v + 1; /* run->cmd is "--", the launcher's argv */
    l->warm_envp = run->env.v;
}

/* What bwrap said before the command could start, for "never started" errors. */
static void setup_reason(const a3s_outcome *o, char *buf, size_t n)
{
    static const char prefix[] = "a3s-sandbox: "; /* the setup step's own, said once */
    const char *diag = o->setup_diag;
    size_t len = o->setup_diag_len;
    if (len > sizeof prefix - 1 && !memcmp(diag, prefix, sizeof prefix - 1)) {
        diag += sizeof prefix - 1;
        len -= sizeof prefix - 1;
    }
    while (len > 0 && (diag[len - 1] == '\n' || diag[len - 1] == '\r'))
        len--;
    if (len == 0)
        snprintf(buf, n, "bubblewrap exited (status %d) without starting the command",
                 WIFEXITED(o->wait_status) ? WEXITSTATUS(o->wait_status)
                                           : 128 + WTERMSIG(o->wait_status));
    else
        snprintf(buf, n, "%.*s", (int)len, diag);
}

/* Nothing of the command ran: a setup failure, whatever the clock said. */
int a3s_linux_never_started(const a3s_outcome *o, a3s_error *err)
{
    char why[1536];
    if (o->launch_failed)
        snprintf(why, sizeof why, "the launcher could not start the command: %s",
                 strerror(o->launch_errno));
    else if (o->setup_timed_out || o->timed_out)
        snprintf(why, sizeof why, "it was not up within %d s (a hung bubblewrap?)",
                 A3S_SETUP_LIMIT_MS / 1000);
    else if (o->output_closed)
        snprintf(why, sizeof why, "the caller's output was closed");
    else
        setup_reason(o, why, sizeof why);
    return a3s_fail(err, A3S_ERR_SETUP, "the sandbox could not be set up%s: %s",
                    o->ns_started ? "" : " (namespaces were not created)", why);
}

int a3s_linux_run_exec(a3s_backend *base, a3s_backend_run *run, const a3s_run_io *io,
                       a3s_outcome *o, a3s_error *err)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    const a3s_plan *p = run->plan;
    int rc = -1;
    int cmd_filter_fd = -1, channel_fd = -1;
    a3s_medproc med = A3S_MEDPROC_NONE;
    int launch_img = -1, relay_img = -1;
    int seccomp_fd = -1, args_fd = -1, setup_fd = -1, started[2] = {-1, -1},
        status[2] = {-1, -1};
    char **bargv = NULL;
    char fdnum[16];
    memset(o, 0, sizeof *o);
    /* The engine refuses runs on an unusable backend; so does the backend itself. */
    if (be->why_unusable || !be->bwrap)
        return a3s_fail(err, A3S_ERR_SETUP, "%s",
                        be->why_unusable ? be->why_unusable : "bubblewrap is not usable");
    if (run->session)
        return a3s_linux_session_exec(be, run, io, o, err);
    a3s_launch l;
    a3s_linux_launch_init(&l, p, io, be->h.workspace, &run->res);
    l.setup_timeout_ms = A3S_SETUP_LIMIT_MS;
    bool refused = false;
    if (a3s_runres_quota(&run->res, &be->quota, p, io->id, &l, &refused, err) < 0) {
        o->quota_refused = refused;
        return -1;
    }
    if (run->mediated) {
        /* Mediated: the relay and the command may open TCP sockets (to the relay's
         * loopback proxies) and nothing else: AF_UNIX never, even when the policy
         * allows it, since a Unix socket could reach the host past the mediator. The
         * relay talks to the mediator only over the channel made before the sandbox. */
        if ((seccomp_fd = export_mediated_filter(&p->seccomp, err)) < 0 ||
            (cmd_filter_fd = export_mediated_filter(&p->seccomp, err)) < 0 ||
            start_mediator(be, run, &channel_fd, &med, err) < 0)
            goto out;
        a3s_runres_record_pid(run->res.rec, med.pid);
    } else if ((seccomp_fd = a3s_seccomp_export(&p->seccomp, err)) < 0) {
        goto out;
    }
    if ((args_fd = a3s_bwrap_args_memfd(&run->args, err)) < 0 ||
        (setup_fd = a3s_bwrap_args_memfd(&run->setup, err)) < 0 ||
        image_fd(be, !be->launcher, A3S_HELPER_LAUNCH, &launch_img, err) < 0 ||
        image_fd(be, run->mediated && !be->relay, A3S_HELPER_RELAY, &relay_img, err) < 0)
        goto out;
    if (pipe2(started, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "exec: pipe2");
        goto out;
    }
    snprintf(fdnum, sizeof fdnum, "%d", A3S_FD_ARGS);
    if (!(bargv = calloc(run->cmd.n + 4, sizeof *bargv))) {
        a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        goto out;
    }
    bargv[0] = be->bwrap;
    bargv[1] = (char *)"--args";
    bargv[2] = fdnum;
    memcpy(bargv + 3, run->cmd.v, run->cmd.n * sizeof *bargv);
    static char *const empty_env[] = {NULL};
    l.path = be->bwrap;
    l.argv = bargv;
    l.envp = empty_env; /* bwrap itself runs with nothing from the caller */
    l.keep[0] = (a3s_fdmap){started[1], A3S_FD_STARTED, false};
    l.keep[1] = (a3s_fdmap){status[1], A3S_FD_STATUS, false};
    l.keep[2] = (a3s_fdmap){args_fd, A3S_FD_ARGS, false};
    l.keep[3] = (a3s_fdmap){seccomp_fd, A3S_FD_SECCOMP, false};
    l.keep[4] = (a3s_fdmap){setup_fd, A3S_FD_SETUP, false};
    l.nkeep = 5;
    if (cmd_filter_fd >= 0)
        l.keep[l.nkeep++] = (a3s_fdmap){cmd_filter_fd, A3S_FD_CMD_FILTER, false};
    if (channel_fd >= 0)
        l.keep[l.nkeep++] = (a3s_fdmap){channel_fd, A3S_FD_MEDIATOR, false};
    if (launch_img >= 0)
        l.keep[l.nkeep++] = (a3s_fdmap){launch_img, A3S_FD_LAUNCHER_IMAGE, false};
    if (relay_img >= 0)
        l.keep[l.nkeep++] = (a3s_fdmap){relay_img, A3S_FD_RELAY_IMAGE, false};
    if (run->mapped) {
        /* a3s_exec_run consumes these too; the rootid namespace is the sandbox's. */
        int uns = fcntl(be->rootid.sandbox_ns, F_DUPFD_CLOEXEC, 0);
        if (uns < 0) {
            a3s_fail_errno(err, A3S_ERR_SETUP, errno, "exec: dup");
            goto out;
        }
        l.keep[l.nkeep++] = (a3s_fdmap){run->ws_mnt, A3S_FD_WS_MOUNT, false};
        l.keep[l.nkeep++] = (a3s_fdmap){run->scratch_mnt, A3S_FD_SCRATCH_MOUNT, false};
        l.keep[l.nkeep++] = (a3s_fdmap){uns, A3S_FD_USERNS, false};
        run->ws_mnt = run->scratch_mnt = -1;
    }
    l.started_fd = started[0];
    l.status_fd = status[0];
    use_ahead(run, &l);
    /* a3s_exec_run consumes the keep fds. */
    started[1] = status[1] = args_fd = seccomp_fd = cmd_filter_fd = setup_fd = -1;
    channel_fd = launch_img = relay_img = -1;
    a3s_trace_mark("launch setup (helper images, fds)");
    if (a3s_exec_run(&l, o, err) < 0)
        goto out;
    if (!o->started && !o->aborted) {
        a3s_linux_never_started(o, err);
        goto out;
    }
    rc = 0;
out:
    /* The tree is gone: the quota events, then the mediator's records. */
    a3s_runres_quota_end(&run->res, rc == 0 ? o : NULL);
    char *records = a3s_medproc_stop(&med);
    if (rc == 0)
        o->network_denials = records;
    else
        free(records);
    o->identity = run->mapped ? "mapped" : geteuid() == 0 ? "host-root" : "caller";
    if (cmd_filter_fd >= 0)
        close(cmd_filter_fd);
    if (channel_fd >= 0)
        close(channel_fd);
    if (launch_img >= 0)
        close(launch_img);
    if (relay_img >= 0)
        close(relay_img);
    free(bargv);
    if (seccomp_fd >= 0)
        close(seccomp_fd);
    if (args_fd >= 0)
        close(args_fd);
    if (setup_fd >= 0)
        close(setup_fd);
    for (int i = 0; i < 2; i++) {
        if (started[i] >= 0)
            close(started[i]);
        if (status[i] >= 0)
            close(status[i]);
    }
    if (rc < 0) {
        a3s_capture_free(o->cap);
        o->cap = NULL;
        free(o->mirror_pending);
        o->mirror_pending = NULL;
    }
    return rc;
}
