/* Sessions of the linux-bwrap backend (backend.h session_open/session_close, and the
 * runs prepared in one).
 *
 * Opening: bubblewrap makes the session's namespaces once (user, mount, UTS, pid, IPC,
 * cgroup and, unless the plan keeps the host's, network) with the read-only host view,
 * /dev and /proc, and starts the launcher with --hold, which hands the user, mount, UTS
 * and network namespaces to this process and exits; bwrap exits with it. From then on
 * the session is these descriptors and nothing runs in it between commands.
 *
 * A command: the launcher is started on the host with --join (join.c). It enters the
 * namespaces, makes the command's own mount, IPC, pid and cgroup namespaces (its own
 * /proc, /dev, and the plan's tmpfs mounts made fresh by the setup records) and goes on
 * as the trusted setup step, then the launcher, exactly as in a fresh run. The
 * supervisor (exec.h) is the same: deadline, output bound, kill-the-tree (the joining
 * launcher is the top process; its child is pid 1 of the command's pid namespace and
 * dies with it). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "a3s_seccomp.h"
#include "bwrap.h"
#include "helpers.h"
#include "linux_backend.h"
#include "protocol.h"
#include "trace.h"
#include "warm.h"

/* The holder must be up and gone within this. */
#define A3S_SESSION_OPEN_MS 10000

struct a3s_backend_session {
    int ns[4];      /* user, mount, UTS, network (-1: the host's) */
    const a3s_plan *plan; /* the session's own (borrowed: the session outlives this) */
    int filter_fd;  /* its seccomp filter (memfd), reopened per command that runs it */
    a3s_warm warm;  /* the next command's launcher, started ahead (in this process only) */
};

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

void a3s_linux_session_close(a3s_backend *base, a3s_backend_session *s)
{
    (void)base;
    if (!s)
        return;
    a3s_warm_discard(&s->warm);
    for (int i = 0; i < 4; i++)
        close_fd(&s->ns[i]);
    close_fd(&s->filter_fd);
    free(s);
}

/* The holder's namespaces from the socket: exactly n descriptors, or none taken. */
static int take_namespaces(int sock, int *ns, int n, a3s_error *err)
{
    char byte;
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int) * 4)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t r;
    do
        r = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno,
                              "session: the sandbox did not hand its namespaces over");
    int got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (got < n)
                ns[got++] = fd;
            else
                close(fd);
        }
    }
    if (r != 1 || got != n || (m.msg_flags & MSG_CTRUNC)) {
        for (int i = 0; i < got; i++)
            close_fd(&ns[i]);
        return a3s_fail(err, A3S_ERR_SETUP, "session: the sandbox handed over %d of %d "
                        "namespaces", got, n);
    }
    return 0;
}

/* The launcher as the launched program: its path, or the embedded image (a copy of its
 * memfd into *img, for A3S_FD_LAUNCHER_IMAGE). NULL with err. */
static const char *launcher_of(a3s_linux_backend *be, int *img, a3s_error *err)
{
    if (be->launcher)
        return be->launcher;
    int im = a3s_linux_image(be, A3S_HELPER_LAUNCH, err);
    if (im < 0)
        return NULL;
    if ((*img = fcntl(im, F_DUPFD_CLOEXEC, 0)) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "session: dup");
        return NULL;
    }
    return A3S_FD_PATH(A3S_FD_LAUNCHER_IMAGE);
}

int a3s_linux_session_open(a3s_backend *base, a3s_backend_run *run, a3s_backend_session **out,
                           a3s_error *err)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    const a3s_plan *p = run->plan;
    *out = NULL;
    if (be->why_unusable || !be->bwrap)
        return a3s_fail(err, A3S_ERR_SETUP, "%s",
                        be->why_unusable ? be->why_unusable : "bubblewrap is not usable");
    if (run->mediated)
        return a3s_fail(err, A3S_ERR_SETUP, "a session cannot hold network grants yet");
    a3s_backend_session *s = calloc(1, sizeof *s);
    if (!s)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    for (int i = 0; i < 4; i++)
        s->ns[i] = -1;
    s->filter_fd = -1;
    s->warm = (a3s_warm)A3S_WARM_NONE;
    int rc = -1, sock[2] = {-1, -1}, status[2] = {-1, -1}, args_fd = -1, img = -1, uns = -1;
    a3s_strv args = {0};
    a3s_outcome o;
    memset(&o, 0, sizeof o);
    bool with_net = p->network == A3S_NET_NONE;
    s->plan = p;
    if ((s->filter_fd = a3s_seccomp_export(&p->seccomp, err)) < 0)
        goto out;
    if (a3s_bwrap_session_args(p, run->mapped, &args, err) < 0 ||
        a3s_strv_push(&args, "--json-status-fd") < 0 || a3s_strv_pushf(&args, "%d", A3S_FD_STATUS) < 0) {
        if (!err->code)
            a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        goto out;
    }
    if ((args_fd = a3s_bwrap_args_memfd(&args, err)) < 0)
        goto out;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock) < 0 ||
        pipe2(status, O_CLOEXEC) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "session: socketpair");
        goto out;
    }
    const char *launcher = launcher_of(be, &img, err);
    if (!launcher)
        goto out;
    if (run->mapped && (uns = fcntl(be->rootid.sandbox_ns, F_DUPFD_CLOEXEC, 0)) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "session: dup");
        goto out;
    }
    char fdnum[16];
    snprintf(fdnum, sizeof fdnum, "%d", A3S_FD_ARGS);
    /* The workspace: no command looks for a mount below it again (setup.h). */
    char *bargv[] = {be->bwrap, (char *)"--args", fdnum, (char *)"--", (char *)launcher,
                     (char *)"--tag", (char *)a3s_stale_run_tag(run->res.rec),
                     (char *)"--hold", (char *)"--ws", p->workspace,
                     with_net ? (char *)"--net" : NULL, NULL};
    static char *const empty_env[] = {NULL};
    static const a3s_run_io quiet = {.stdin_fd = -1, .cancel_fd = -1, .tty_fd = -1,
                                     .timeout_ms = A3S_SESSION_OPEN_MS,
                                     .mirror_fd = {-1, -1}};
    a3s_launch l;
    a3s_linux_launch_init(&l, p, &quiet, "/", &run->res);
    l.path = be->bwrap;
    l.argv = bargv;
    l.envp = empty_env;
    l.output_budget = 8192;
    l.keep[l.nkeep++] = (a3s_fdmap){status[1], A3S_FD_STATUS, false};
    l.keep[l.nkeep++] = (a3s_fdmap){args_fd, A3S_FD_ARGS, false};
    l.keep[l.nkeep++] = (a3s_fdmap){sock[1], A3S_FD_HOLD, false};
    if (img >= 0)
        l.keep[l.nkeep++] = (a3s_fdmap){img, A3S_FD_LAUNCHER_IMAGE, false};
    if (uns >= 0)
        l.keep[l.nkeep++] = (a3s_fdmap){uns, A3S_FD_USERNS, false};
    l.status_fd = status[0];
    status[1] = args_fd = sock[1] = img = uns = -1; /* a3s_exec_run consumes them */
    if (a3s_exec_run(&l, &o, err) < 0)
        goto out;
    int code = WIFEXITED(o.wait_status) ? WEXITSTATUS(o.wait_status) : -1;
    if (code != 0) {
        char *diag = NULL, *rest = NULL;
        size_t dn = 0, rn = 0;
        (void)a3s_capture_render(o.cap, A3S_STDERR, &diag, &dn, &rest, &rn);
        while (diag && dn > 0 && diag[dn - 1] == '\n')
            diag[--dn] = '\0';
        a3s_fail(err, A3S_ERR_SETUP, "the session's sandbox could not be set up: %s",
                 diag && *diag ? diag : "bubblewrap failed");
        free(diag);
        free(rest);
        goto out;
    }
    if (take_namespaces(sock[0], s->ns, with_net ? 4 : 3, err) < 0)
        goto out;
    rc = 0;
out:
    a3s_capture_free(o.cap);
    free(o.mirror_pending);
    a3s_strv_free(&args);
    close_fd(&sock[0]);
    close_fd(&sock[1]);
    close_fd(&status[0]);
    close_fd(&status[1]);
    close_fd(&args_fd);
    close_fd(&img);
    close_fd(&uns);
    if (rc < 0) {
        a3s_linux_session_close(base, s);
        return -1;
    }
    *out = s;
    return 0;
}

/* The launcher's image and the session's namespaces, dup'd into l's keep list at the
 * numbers a joining launcher takes them from (held: a warm launcher has them already and
 * is not passed them again). img is consumed either way. */
static int keep_join_fds(const a3s_backend_session *s, a3s_launch *l, int img, bool held,
                         a3s_error *err)
{
    static const int target[4] = {A3S_FD_NS_USER, A3S_FD_NS_MNT, A3S_FD_NS_UTS,
                                  A3S_FD_NS_NET};
    int ns[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; i++)
        if (s->ns[i] >= 0 && (ns[i] = fcntl(s->ns[i], F_DUPFD_CLOEXEC, 0)) < 0) {
            int e = errno;
            for (int j = 0; j < i; j++)
                close_fd(&ns[j]);
            close_fd(&img);
            return a3s_fail_errno(err, A3S_ERR_SETUP, e, "session: dup");
        }
    if (img >= 0)
        l->keep[l->nkeep++] = (a3s_fdmap){img, A3S_FD_LAUNCHER_IMAGE, held};
    for (int i = 0; i < 4; i++)
        if (ns[i] >= 0)
            l->keep[l->nkeep++] = (a3s_fdmap){ns[i], target[i], held};
    return 0;
}

int a3s_linux_session_warm(a3s_backend *base, a3s_backend_session *s, a3s_error *err)
{
    a3s_linux_backend *be = (a3s_linux_backend *)base;
    if (!s)
        return a3s_fail(err, A3S_ERR_INVALID, "session: none");
    if (s->warm.pid > 0)
        return 0;
    int img = -1;
    const char *launcher = launcher_of(be, &img, err);
    if (!launcher)
        return -1;
    a3s_launch l;
    memset(&l, 0, sizeof l);
    if (keep_join_fds(s, &l, img, false, err) < 0)
        return -1;
    /* As a launcher started for one of the session's commands (a3s_linux_launch_init):
     * the plan's limits, in "/"; the command's environment comes with it. */
    char *argv[] = {(char *)launcher, "--join", "--setup", "--warm", "--", NULL};
    static char *const no_env[] = {NULL};
    l.path = launcher;
    l.argv = argv;
    l.envp = no_env;
    l.cwd = "/";
    l.stdin_fd = l.started_fd = l.status_fd = l.cancel_fd = l.tty_fd = -1;
    l.nofile = s->plan->limits.nofile;
    l.core_bytes = s->plan->limits.core_bytes;
    l.fsize = s->plan->limits.file_size_bytes;
    if (a3s_warm_start(&s->warm, &l, err) < 0) /* consumes the keep fds */
        return -1;
    s->warm.hold_mnt = true;
    return 0;
}

void a3s_linux_session_unwarm(a3s_backend *base, a3s_backend_session *s)
{
    (void)base;
    if (s)
        a3s_warm_discard(&s->warm);
}

/* One command of the session: the launcher joins its namespaces on the host, under the
 * same supervisor as a fresh run's bubblewrap. */
int a3s_linux_session_exec(a3s_linux_backend *be, a3s_backend_run *run, const a3s_run_io *io,
                           a3s_outcome *o, a3s_error *err)
{
    const a3s_plan *p = run->plan;
    a3s_backend_session *s = run->session;
    int rc = -1, setup_fd = -1, filter = -1, img = -1, started[2] = {-1, -1};
    memset(o, 0, sizeof *o);
    a3s_launch l;
    a3s_linux_launch_init(&l, p, io, "/", &run->res);
    l.setup_timeout_ms = A3S_SESSION_OPEN_MS;
    bool refused = false;
    if (a3s_runres_quota(&run->res, &be->quota, p, io->id, &l, &refused, err) < 0) {
        o->quota_refused = refused;
        return -1;
    }
    /* The warm launcher (started ahead for the session's plan, without quota cgroups)
     * takes the command unless this one needs another. */
    bool warm = s->warm.pid > 0 && p == s->plan && l.ncgroup_fds == 0 && !l.tty;
    if (!warm)
        a3s_warm_discard(&s->warm);
    char path[32];
    /* The filter of this command's plan: the session's, read from an open file of its own
     * (its own offset), or, for a plan evaluated again, its own. */
    snprintf(path, sizeof path, "/proc/self/fd/%d", s->filter_fd);
    if (p != s->plan) {
        if ((filter = a3s_seccomp_export(&p->seccomp, err)) < 0)
            goto out;
    } else if ((filter = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "session: the seccomp filter");
        goto out;
    }
    if ((setup_fd = a3s_bwrap_args_memfd(&run->setup, err)) < 0)
        goto out;
    const char *launcher = launcher_of(be, &img, err);
    if (!launcher)
        goto out;
    /* A socket: the launcher, pid 1 of the command's pid namespace, sends a pidfd of
     * itself with its "S" (nspid.h). */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, started) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "session: socketpair");
        goto out;
    }
    /* What a warm launcher holds already (its image, the session's namespaces) is
     * passed only to a launcher started now. */
    int own_img = img;
    img = -1;
    if (keep_join_fds(s, &l, own_img, warm, err) < 0)
        goto out;
    /* run->cmd is "--", launcher, ...: the launcher's own argv follows the "--". */
    l.path = launcher;
    l.argv = run->cmd.v + 1;
    l.envp = run->env.v;
    l.keep[l.nkeep++] = (a3s_fdmap){started[1], A3S_FD_STARTED, false};
    l.keep[l.nkeep++] = (a3s_fdmap){filter, A3S_FD_SECCOMP, false};
    l.keep[l.nkeep++] = (a3s_fdmap){setup_fd, A3S_FD_SETUP, false};
    l.warm = warm ? &s->warm : NULL;
    /* Its launcher is pid 1 of the command's namespace: the command's end ("Z") ends the
     * run, its launcher is reaped at run_close. */
    l.late_pidfd = warm ? &run->late_pidfd : NULL;
    if (run->mapped) {
        l.keep[l.nkeep++] = (a3s_fdmap){run->ws_mnt, A3S_FD_WS_MOUNT, false};
        l.keep[l.nkeep++] = (a3s_fdmap){run->scratch_mnt, A3S_FD_SCRATCH_MOUNT, false};
        run->ws_mnt = run->scratch_mnt = -1;
    }
    l.started_fd = started[0];
    /* a3s_exec_run consumes the keep fds. */
    started[1] = filter = setup_fd = -1;
    a3s_trace_mark("session command (fds)");
    if (a3s_exec_run(&l, o, err) < 0)
        goto out;
    if (!o->started && !o->aborted) {
        a3s_linux_never_started(o, err);
        goto out;
    }
    rc = 0;
out:
    if (s->warm.mnt >= 0 && run->held_mnt < 0) {
        run->held_mnt = s->warm.mnt; /* the command's, handed over with it */
        s->warm.mnt = -1;
    }
    a3s_runres_quota_end(&run->res, rc == 0 ? o : NULL);
    o->identity = run->mapped ? "mapped" : geteuid() == 0 ? "host-root" : "caller";
    close_fd(&filter);
    close_fd(&setup_fd);
    close_fd(&img);
    close_fd(&started[0]);
    close_fd(&started[1]);
    if (rc < 0) {
        a3s_capture_free(o->cap);
        o->cap = NULL;
        free(o->mirror_pending);
        o->mirror_pending = NULL;
    }
    return rc;
}
