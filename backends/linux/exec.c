#include "exec.h"
#include "bwstatus.h"
#include "warm.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "mirror.h"
#include "nspid.h"
#include "ptypeer.h"
#include "stdin_feed.h"
#include "trace.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define READ_CHUNK A3S_STDIN_CHUNK

static int sys_pidfd_open(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static int sys_pidfd_send_signal(int pidfd, int sig)
{
    return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* In the child (spawn_child): only async-signal-safe calls. Reports errno on err_fd. */
static __attribute__((noreturn)) void child_fail(int err_fd, int stage)
{
    int e[2] = {stage, errno};
    ssize_t w = write(err_fd, e, sizeof e);
    (void)w;
    _exit(127);
}

static __attribute__((noreturn)) void child_run(const a3s_launch *l, pid_t parent, int in_fd,
                                                int out_fd, int errout_fd, int err_fd)
{
    /* Own session, hence own process group (the whole tree can be signalled at once) and
     * no controlling terminal: nothing in the tree can open /dev/tty or be reached by the
     * caller's terminal job control. */
    if (setsid() < 0)
        child_fail(err_fd, 1);
    /* If the supervisor dies, the tree must die with it. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        child_fail(err_fd, 2);
    if (getppid() != parent)
        _exit(127);

    /* Undo whatever the host process did to signals (Lua hosts often ignore SIGPIPE):
     * default actions first, then unblock (spawn blocked them all: a handler of the host
     * must never run here, in its memory). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        if (s != SIGKILL && s != SIGSTOP)
            (void)sigaction(s, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        child_fail(err_fd, 3);

    /* Move every fd we keep above the highest target first, so dup2 cannot clobber. */
    int high[A3S_EXEC_MAX_KEEP + 4];
    int src[4] = {in_fd, out_fd, errout_fd, err_fd};
    for (int i = 0; i < 4; i++) {
        high[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 64);
        if (high[i] < 0)
            child_fail(err_fd, 4);
    }
    err_fd = high[3];
    for (size_t i = 0; i < l->nkeep; i++) {
        high[4 + i] = fcntl(l->keep[i].fd, F_DUPFD_CLOEXEC, 64);
        if (high[4 + i] < 0)
            child_fail(err_fd, 4);
    }
    if (dup2(high[0], 0) < 0 || dup2(high[1], 1) < 0 || dup2(high[2], 2) < 0)
        child_fail(err_fd, 5);
    /* After setsid(): a session leader without a terminal may take the pty slave. */
    if (l->tty_ctty && ioctl(0, TIOCSCTTY, 0) < 0)
        child_fail(err_fd, 11);
    int max_target = 2;
    for (size_t i = 0; i < l->nkeep; i++) {
        if (dup2(high[4 + i], l->keep[i].target) < 0)
            child_fail(err_fd, 5);
        if (l->keep[i].target > max_target)
            max_target = l->keep[i].target;
    }
    /* Join the quota cgroups before anything else runs: "0" means this process. */
    for (size_t i = 0; i < l->ncgroup_fds; i++)
        if (write(l->cgroup_fds[i], "0", 1) != 1)
            child_fail(err_fd, 10);
    if (l->use_cwd_fd && fchdir(l->cwd_fd) < 0)
        child_fail(err_fd, 8);
    /* Everything else is closed now, not only at exec: the caller's descriptors include
     * lock-holding ones (the run record, stale.h) that must not look alive in this child
     * a moment longer than the caller. err_fd (one of our high copies) stays until
     * execve succeeds (CLOEXEC). */
    if ((err_fd > max_target + 1 &&
         syscall(SYS_close_range, (unsigned)max_target + 1, (unsigned)err_fd - 1, 0) < 0) ||
        syscall(SYS_close_range, (unsigned)err_fd + 1, ~0U, 0) < 0)
        child_fail(err_fd, 6);

    if (l->nofile > 0) {
        struct rlimit rl = {(rlim_t)l->nofile, (rlim_t)l->nofile};
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            child_fail(err_fd, 7);
    }
    if (l->core_bytes >= 0) {
        struct rlimit rl = {(rlim_t)l->core_bytes, (rlim_t)l->core_bytes};
        if (setrlimit(RLIMIT_CORE, &rl) < 0)
            child_fail(err_fd, 7);
    }
    if (l->fsize > 0) {
        struct rlimit rl = {(rlim_t)l->fsize, (rlim_t)l->fsize};
        if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
            child_fail(err_fd, 7);
    }
    if (!l->use_cwd_fd && l->cwd && chdir(l->cwd) < 0)
        child_fail(err_fd, 8);
    execve(l->path, l->argv, l->envp);
    child_fail(err_fd, 9);
}

typedef struct child_args {
    const a3s_launch *l;
    pid_t parent;
    int in_fd, out_fd, errout_fd, err_fd;
} child_args;

static int child_entry(void *p)
{
    const child_args *a = p;
    child_run(a->l, a->parent, a->in_fd, a->out_fd, a->errout_fd, a->err_fd);
}

/* The child shares our memory until its execve (CLONE_VM | CLONE_VFORK, as posix_spawn
 * does): a fork would copy the page tables and leave every page we write afterwards to a
 * copy-on-write fault, milliseconds per run on a virtual machine. We wait meanwhile;
 * the child writes only its own stack, and runs with every signal blocked until it has
 * reset their actions (child_run). */
#define CHILD_STACK (256 * 1024)
static pid_t spawn_child(child_args *a)
{
#ifdef A3S_UNDER_ASAN
    pid_t fpid = fork();
    if (fpid == 0)
        child_run(a->l, a->parent, a->in_fd, a->out_fd, a->errout_fd, a->err_fd);
    return fpid;
#endif
    void *stack = mmap(NULL, CHILD_STACK, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    sigset_t all, old;
    sigfillset(&all);
    int rc = pthread_sigmask(SIG_SETMASK, &all, &old);
    if (rc != 0) {
        (void)munmap(stack, CHILD_STACK);
        errno = rc;
        return -1;
    }
    pid_t pid = clone(child_entry, (char *)stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD,
                      a);
    int e = errno;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    (void)munmap(stack, CHILD_STACK);
    errno = e;
    return pid;
}

static const char *stage_name(int stage)
{
    switch (stage) {
    case 1: return "setsid";
    case 2: return "prctl(PR_SET_PDEATHSIG)";
    case 3: return "sigprocmask";
    case 4: return "fcntl(F_DUPFD_CLOEXEC)";
    case 5: return "dup2";
    case 6: return "close_range";
    case 7: return "setrlimit";
    case 8: return "chdir";
    case 10: return "joining the quota cgroup";
    case 11: return "ioctl(TIOCSCTTY)";
    default: return "execve";
    }
}

static void close_keep(const a3s_launch *l)
{
    for (size_t i = 0; i < l->nkeep; i++)
        if (l->keep[i].fd >= 0)
            close(l->keep[i].fd);
}

/* ns_pidfd: the sandbox's first process (pid 1 of its pid namespace), or -1. */
static void kill_tree(pid_t pgid, int pidfd, int ns_pidfd)
{
    /* With the namespace's pid 1 known, it alone: its end tears the whole pid namespace
     * down, and its parent (bwrap, or a session's joining launcher, all that is outside
     * the namespace) reaps it and exits by itself. Killed at once, that parent would
     * leave pid 1 a zombie of the host's init. */
    if (ns_pidfd >= 0 && sys_pidfd_send_signal(ns_pidfd, SIGKILL) == 0)
        return;
    /* Else the group first (stragglers outside bwrap's pid namespace in process-host
     * mode), then the top process, then pid 1 (bwrap's death alone does not always end
     * the namespace: the launcher's parent-death signal is not kept by every identity
     * switch). */
    if (kill(-pgid, SIGKILL) < 0 && errno != ESRCH) {
        /* nothing more to do: the pidfd signals below still apply */
    }
    if (sys_pidfd_send_signal(pidfd, SIGKILL) < 0 && errno != ESRCH) {
        /* already reaped or gone */
    }
    if (ns_pidfd >= 0 && sys_pidfd_send_signal(ns_pidfd, SIGKILL) < 0 && errno != ESRCH) {
        /* gone with bwrap */
    }
}


pid_t a3s_exec_spawn(const a3s_launch *l, a3s_error *err)
{
    int ep[2] = {-1, -1};
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0 || pipe2(ep, O_CLOEXEC) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: %s", null_fd < 0 ? "/dev/null" : "pipe2");
        if (null_fd >= 0)
            close(null_fd);
        close_keep(l);
        return -1;
    }
    child_args ca = {.l = l, .parent = getpid(), .in_fd = null_fd, .out_fd = null_fd,
                     .errout_fd = null_fd, .err_fd = ep[1]};
    pid_t pid = spawn_child(&ca);
    int e = errno;
    close(ep[1]);
    close(null_fd);
    close_keep(l);
    if (pid < 0) {
        close(ep[0]);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "spawn: clone");
    }
    int st[2];
    ssize_t n = a3s_read_retry(ep[0], st, sizeof st);
    close(ep[0]);
    if (n == (ssize_t)sizeof st) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        return a3s_fail_errno(err, A3S_ERR_SETUP, st[1], "cannot start %s: %s", l->path,
                              stage_name(st[0]));
    }
    return pid;
}

int a3s_exec_run(const a3s_launch *l, a3s_outcome *o, a3s_error *err)
{
    int out_p[2] = {-1, -1}, errp[2] = {-1, -1}, in_p[2] = {-1, -1}, ep[2] = {-1, -1};
    int null_fd = -1, pidfd = -1, ns_pidfd = -1, tfd = -1, tty_slave = -1;
    int warm_status = -1; /* taken from a warm launcher under bubblewrap: ours to close */
    int rc = -1;
    bool keep_closed = false;
    pid_t pid = -1;
    bool reaped = false;
    char *buf = NULL;
    stdin_feed feed = {.src = -1, .pos = -1};
    a3s_mirror m = {.fd = {-1, -1}, .wfd = {-1, -1}};

    memset(o, 0, sizeof *o);
    o->reported_exit = -1;
    unsigned long long t0 = a3s_now_ms();

    o->cap = a3s_capture_new(l->output_budget);
    buf = malloc(READ_CHUNK);
    if (l->mirror && a3s_mirror_open(&m, l->mirror_fd[0], l->mirror_fd[1], READ_CHUNK) < 0)
        m.buf = NULL;
    if (!o->cap || !buf || (l->mirror && !m.buf)) {
        a3s_fail(err, A3S_ERR_INTERNAL, "spawn: out of memory");
        goto out;
    }
    /* On a terminal, the master stands for the output pipe (read) and the stdin pipe
     * (written): the same loop, the same capture and mirror. */
    bool tty = l->tty;
    if (tty && a3s_pty_open(l->tty_fd, &tty_slave, &out_p[0], &in_p[1], err) < 0)
        goto out;
    if ((!tty && (pipe2(out_p, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)) ||
        pipe2(ep, O_CLOEXEC) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: pipe2");
        goto out;
    }
    /* Larger pipes: fewer wakeups for chatty commands (best effort). */
    (void)fcntl(out_p[0], F_SETPIPE_SZ, 1 << 20);
    int in_fd = -1;
    stdin_route route = l->stdin_data ? STDIN_FORWARD : STDIN_NULL;
    if (l->stdin_fd >= 0 && a3s_stdin_route(l->stdin_fd, &route, &feed.kind, err) < 0)
        goto out;
    if (tty) {
        /* The command reads its terminal; what it would have read is typed into it. */
        in_fd = tty_slave;
        if (l->stdin_fd >= 0 && route != STDIN_NULL) {
            feed.src = l->stdin_fd;
            if (!(feed.buf = malloc(READ_CHUNK))) {
                a3s_fail(err, A3S_ERR_INTERNAL, "spawn: out of memory");
                goto out;
            }
        } else if (l->stdin_fd < 0 && l->stdin_data) {
            feed.pend = l->stdin_data;
            feed.left = l->stdin_len;
        }
    } else if (route == STDIN_DIRECT) {
        in_fd = l->stdin_fd;
    } else if (route == STDIN_FORWARD) {
        if (pipe2(in_p, O_CLOEXEC) < 0) {
            a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: pipe2");
            goto out;
        }
        in_fd = in_p[0];
        if (l->stdin_fd >= 0) {
            feed.src = l->stdin_fd;
            if (!(feed.buf = malloc(READ_CHUNK))) {
                a3s_fail(err, A3S_ERR_INTERNAL, "spawn: out of memory");
                goto out;
            }
            if (feed.kind == SRC_FILE)
                feed.pos = lseek(feed.src, 0, SEEK_CUR); /* -1: not seekable, plain reads */
        } else {
            feed.pend = l->stdin_data;
            feed.left = l->stdin_len;
        }
    } else {
        null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd < 0) {
            a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: open /dev/null");
            goto out;
        }
        in_fd = null_fd;
    }

    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (tfd < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: timerfd_create");
        goto out;
    }

    child_args ca = {.l = l, .parent = getpid(), .in_fd = in_fd,
                     .out_fd = tty ? tty_slave : out_p[1],
                     .errout_fd = tty ? tty_slave : errp[1], .err_fd = ep[1]};
    /* A warm launcher takes the command as it is (it has executed already: no exec
     * error to wait for); what it cannot take is started as without it. */
    pid = l->warm ? a3s_warm_handover(l->warm, l, in_fd, ca.out_fd, ca.errout_fd) : -1;
    if (pid > 0) {
        close_fd(&ep[1]);
        /* Under bubblewrap, its status is the sandbox's (ahead.h). */
        warm_status = l->warm->status;
        l->warm->status = -1;
    } else {
        if (l->warm)
            a3s_warm_discard(l->warm);
        pid = spawn_child(&ca);
    }
    if (pid < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: clone");
        goto out;
    }
    a3s_trace_mark("fork");
    /* Recorded at once (see stale.h): the child dies with us until then (PDEATHSIG). */
    if (l->on_pid)
        l->on_pid(l->pid_ud, pid);
    keep_closed = true;
    close_keep(l);

    /* Parent. The child's setsid() made its group; setting it from this side as well would
     * make setsid() fail if we came first. Until the child has called it, the child is
     * one process that kill_tree reaches through its pidfd. */
    close_fd(&out_p[1]);
    close_fd(&errp[1]);
    close_fd(&ep[1]);
    close_fd(&in_p[0]);
    close_fd(&null_fd);
    close_fd(&tty_slave); /* only the tree holds it now: its hangup ends the output */

    pidfd = sys_pidfd_open(pid);
    if (pidfd < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: pidfd_open");
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        reaped = true;
        goto out;
    }

    /* Did execve succeed? EOF on the CLOEXEC error pipe means yes. */
    int e[2];
    ssize_t n = a3s_read_retry(ep[0], e, sizeof e);
    close_fd(&ep[0]);
    if (n == (ssize_t)sizeof e) {
        (void)waitpid(pid, NULL, 0);
        reaped = true;
        a3s_fail_errno(err, A3S_ERR_SETUP, e[1], "cannot start %s: %s", l->path,
                       stage_name(e[0]));
        goto out;
    }

    struct itimerspec its;
    memset(&its, 0, sizeof its);
    /* With a launcher, setting up the sandbox has a bound of its own; the deadline counts
     * from the command's start (the "S" byte), so a deadline shorter than a slow setup
     * still gives the command its time, and a setup that hangs is a setup failure. */
    bool setup_phase = l->started_fd >= 0 && l->setup_timeout_ms > 0;
    int64_t ms = setup_phase ? l->setup_timeout_ms : l->timeout_ms > 0 ? l->timeout_ms : 1;
    its.it_value.tv_sec = ms / 1000;
    its.it_value.tv_nsec = (ms % 1000) * 1000000L;
    if (!setup_phase && l->deadline_out)
        *l->deadline_out = (int64_t)a3s_now_ms() + ms;
    if (timerfd_settime(tfd, 0, &its, NULL) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: timerfd_settime");
        kill_tree(pid, pidfd, ns_pidfd);
        (void)waitpid(pid, NULL, 0);
        reaped = true;
        goto out;
    }

    /* Our own pipe, not shared with anyone: non-blocking writes are safe here. */
    if (in_p[1] >= 0 && fcntl(in_p[1], F_SETFL, O_NONBLOCK) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "spawn: fcntl(O_NONBLOCK)");
        kill_tree(pid, pidfd, ns_pidfd);
        goto out;
    }
    if (in_p[1] >= 0 && feed.src < 0 && feed.left == 0)
        close_fd(&in_p[1]); /* empty stdin_data: EOF at once */
    char status_buf[1024];
    size_t status_len = 0;
    char launch_buf[64];
    size_t launch_len = 0;
    int started_fd = l->started_fd, status_fd = warm_status >= 0 ? warm_status : l->status_fd;
    bool exited = false, killed = false, ended = false;
    unsigned long long exit_ms = 0;

    for (;;) {
        struct pollfd pf[12];
        int idx_out = -1, idx_err = -1, idx_pid = -1, idx_t = -1, idx_in = -1, idx_s = -1,
            idx_st = -1, idx_c = -1, idx_src = -1, idx_m[2] = {-1, -1}, np = 0;
        /* A mirrored chunk waiting for its reader: no more output is read meanwhile. */
        bool mpend = m.len > m.off;
        unsigned long long now_ms = a3s_now_ms();
        if (l->cancel_fd >= 0 && !killed) {
            idx_c = np;
            pf[np++] = (struct pollfd){l->cancel_fd, POLLIN, 0};
        }
        if (mpend && m.fd[m.stream - 1] >= 0) {
            idx_m[m.stream - 1] = np;
            pf[np++] = (struct pollfd){m.fd[m.stream - 1], POLLOUT, 0};
        }
        for (int k = 0; k < 2 && !mpend; k++) {
            if (m.fd[k] < 0 || !m.wrote[k] || (k == 1 && m.fd[1] == m.fd[0] && m.wrote[0]))
                continue;
            idx_m[k] = np; /* events 0: POLLERR once the reader is gone */
            pf[np++] = (struct pollfd){m.fd[k], 0, 0};
        }
        if (out_p[0] >= 0 && !mpend) {
            idx_out = np;
            pf[np++] = (struct pollfd){out_p[0], POLLIN, 0};
        }
        if (errp[0] >= 0 && !mpend) {
            idx_err = np;
            pf[np++] = (struct pollfd){errp[0], POLLIN, 0};
        }
        if (!exited) {
            idx_pid = np;
            pf[np++] = (struct pollfd){pidfd, POLLIN, 0};
        }
        if (!killed) {
            idx_t = np;
            pf[np++] = (struct pollfd){tfd, POLLIN, 0};
        }
        if (in_p[1] >= 0) {
            /* Without pending bytes, events 0 still reports POLLERR once the command
             * has closed its end: forwarding stops without a failed write. */
            idx_in = np;
            pf[np++] = (struct pollfd){in_p[1], feed.left ? POLLOUT : 0, 0};
        }
        /* The caller's fd is read only when the last chunk is in the pipe: what the
         * supervisor holds is bounded by one chunk. */
        bool src_paused = feed.resume_ms > now_ms;
        if (in_p[1] >= 0 && feed.src >= 0 && feed.left == 0 && !src_paused) {
            idx_src = np;
            pf[np++] = (struct pollfd){feed.src, POLLIN, 0};
        }
        if (started_fd >= 0) {
            idx_s = np;
            pf[np++] = (struct pollfd){started_fd, POLLIN, 0};
        }
        if (status_fd >= 0) {
            idx_st = np;
            pf[np++] = (struct pollfd){status_fd, POLLIN, 0};
        }
        if (exited && out_p[0] < 0 && errp[0] < 0 && started_fd < 0 && status_fd < 0)
            break;
        if (ended && !killed && out_p[0] < 0 && errp[0] < 0)
            break; /* the launcher's own exit is the caller's to reap (late_pidfd) */
        /* After the top process is gone, its tree is being torn down; once killed we
         * give the pipes a short bounded drain instead of waiting forever. */
        int wait_ms = -1;
        if (exited && killed) {
            if (now_ms - exit_ms >= 100)
                break;
            wait_ms = (int)(100 - (now_ms - exit_ms));
        }
        if (in_p[1] >= 0 && feed.src >= 0 && src_paused) {
            int pause_ms = (int)(feed.resume_ms - now_ms);
            if (wait_ms < 0 || pause_ms < wait_ms)
                wait_ms = pause_ms;
        }
        int pr = poll(pf, (nfds_t)np, wait_ms);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            a3s_fail_errno(err, A3S_ERR_INTERNAL, errno, "supervise: poll");
            kill_tree(pid, pidfd, ns_pidfd);
            goto out;
        }
        if (pr == 0)
            continue;

        /* The launcher's pipe first: "S" precedes any output of the command. */
        if (idx_s >= 0 && (pf[idx_s].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t r = a3s_nspid_read_started(started_fd, launch_buf + launch_len,
                                               sizeof launch_buf - 1 - launch_len,
                                               &ns_pidfd);
            if (r > 0) {
                launch_len += (size_t)r;
                launch_buf[launch_len] = '\0';
                if (launch_buf[0] == 'S' && !o->launch_failed && !o->started && !killed) {
                    o->started = true;
                    if (setup_phase) {
                        struct itimerspec dl;
                        memset(&dl, 0, sizeof dl);
                        int64_t t = l->timeout_ms > 0 ? l->timeout_ms : 1;
                        dl.it_value.tv_sec = t / 1000;
                        dl.it_value.tv_nsec = (t % 1000) * 1000000L;
                        setup_phase = false;
                        if (l->deadline_out)
                            *l->deadline_out = (int64_t)a3s_now_ms() + t;
                        if (timerfd_settime(tfd, 0, &dl, NULL) < 0) {
                            /* no deadline for the command: fail closed, kill it now */
                            killed = true;
                            o->timed_out = true;
                            kill_tree(pid, pidfd, ns_pidfd);
                        }
                    }
                }
                char *x = launch_len > 1 ? strpbrk(launch_buf + 1, "XZ") : NULL;
                char *end = x ? strchr(x, '\n') : NULL;
                if (x && end) {
                    o->has_command_status = true;
                    o->command_status = atoi(x + 1);
                    /* "Z": nothing of the command's namespace is left but its pid 1. */
                    ended = *x == 'Z' && l->late_pidfd;
                }
                char *ef = launch_len > 1 ? strchr(launch_buf + 1, 'E') : NULL;
                if (ef && strchr(ef, '\n')) {
                    o->launch_failed = true;
                    o->launch_errno = atoi(ef + 1);
                    o->started = false;
                }
                if (launch_len == sizeof launch_buf - 1)
                    started_fd = -1; /* more than the protocol ever sends: stop listening */
            } else if (r == 0 || errno != EINTR) {
                started_fd = -1;
            }
        }
        for (int s = 0; s < 2; s++) {
            int idx = s == 0 ? idx_out : idx_err;
            int *fd = s == 0 ? &out_p[0] : &errp[0];
            if (idx < 0 || !(pf[idx].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (m.len > m.off)
                continue; /* the other stream's chunk is waiting for its reader */
            ssize_t r = read(*fd, buf, READ_CHUNK);
            if (r > 0 && l->started_fd >= 0 && !o->started) {
                /* Before the command started, only the launcher speaks: keep its words
                 * for the setup error instead of passing them off as command output. */
                size_t room = sizeof o->setup_diag - 1 - o->setup_diag_len;
                size_t take = (size_t)r < room ? (size_t)r : room;
                memcpy(o->setup_diag + o->setup_diag_len, buf, take);
                o->setup_diag_len += take;
                o->setup_diag[o->setup_diag_len] = '\0';
            } else if (r > 0) {
                size_t head = a3s_capture_feed(o->cap, s + 1, buf, (size_t)r);
                /* An interactive session shows everything; the capture stays bounded. */
                size_t show = tty ? (size_t)r : head;
                if (show > 0 && m.fd[s] >= 0) {
                    memcpy(m.buf, buf, show);
                    m.off = 0;
                    m.len = show;
                    m.stream = s + 1;
                    m.wrote[s] = true;
                }
                if (l->on_output && !o->aborted &&
                    l->on_output(l->output_ud, s + 1, buf, (size_t)r, head) != 0) {
                    /* Stop now: kill the tree, then finish like a deadline kill. */
                    o->aborted = true;
                    killed = true;
                    kill_tree(pid, pidfd, ns_pidfd);
                    if (exited)
                        exit_ms = a3s_now_ms();
                }
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                close_fd(fd);
            }
        }
        for (int k = 0; k < 2; k++) {
            if (idx_m[k] < 0 || !pf[idx_m[k]].revents)
                continue;
            if (a3s_mirror_step(&m, k, pf[idx_m[k]].revents) < 0 && !o->output_closed) {
                o->output_closed = true;
                killed = true;
                kill_tree(pid, pidfd, ns_pidfd);
                if (exited)
                    exit_ms = a3s_now_ms();
            }
        }
        if (idx_st >= 0 && (pf[idx_st].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t r = read(status_fd, status_buf + status_len,
                             sizeof status_buf - 1 - status_len);
            if (r > 0) {
                status_len += (size_t)r;
                a3s_bwstatus_parse(l, status_buf, &status_len, o, pid, &ns_pidfd);
                if (status_len == sizeof status_buf - 1)
                    status_len = 0; /* an overlong line is not ours to parse */
            } else if (r == 0 || errno != EINTR) {
                status_fd = -1;
            }
        }
        if (idx_in >= 0 && (pf[idx_in].revents & (POLLERR | POLLHUP | POLLNVAL))) {
            close_fd(&in_p[1]); /* the command closed its stdin: stop forwarding */
        } else if (idx_in >= 0 && (pf[idx_in].revents & POLLOUT)) {
            if (!a3s_stdin_feed_write(&feed, in_p[1]) || (feed.left == 0 && feed.src < 0))
                close_fd(&in_p[1]);
        }
        if (idx_src >= 0 && in_p[1] >= 0 && pf[idx_src].revents) {
            ssize_t r = (pf[idx_src].revents & POLLNVAL) ? 0 : a3s_stdin_read(&feed, READ_CHUNK);
            if (r > 0) {
                feed.pend = feed.buf;
                feed.left = (size_t)r;
                if (!a3s_stdin_feed_write(&feed, in_p[1]))
                    close_fd(&in_p[1]);
            } else if (r == 0 || errno != EAGAIN) {
                /* EOF, or the caller's fd failed (hangup, not readable): EOF for the
                 * command too, once what is pending (nothing: see above) is written. */
                feed.src = -1;
                close_fd(&in_p[1]);
            }
        }
        if (idx_c >= 0 && (pf[idx_c].revents & (POLLIN | POLLHUP | POLLERR))) {
            o->aborted = true;
            killed = true;
            kill_tree(pid, pidfd, ns_pidfd);
            if (exited)
                exit_ms = a3s_now_ms();
        }
        uint64_t expirations = 0;
        /* A timer re-armed in this very iteration (the "S" byte came with its setup
         * bound's expiry) has no expiration left to read: that event is stale. */
        if (idx_t >= 0 && (pf[idx_t].revents & POLLIN) &&
            read(tfd, &expirations, sizeof expirations) == (ssize_t)sizeof expirations) {
            killed = true;
            if (setup_phase)
                o->setup_timed_out = true; /* the command never started */
            else
                o->timed_out = !exited && !ended; /* after "Z": only a pipe held open */
            kill_tree(pid, pidfd, ns_pidfd);
            if (exited)
                exit_ms = a3s_now_ms();
        }
        if (idx_pid >= 0 && (pf[idx_pid].revents & POLLIN)) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            a3s_trace_mark("sandbox (bwrap, setup step, launcher, command) exited");
            if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) < 0) {
                a3s_fail_errno(err, A3S_ERR_INTERNAL, errno, "supervise: waitid");
                kill_tree(pid, pidfd, ns_pidfd);
                goto out;
            }
            reaped = true;
            exited = true;
            /* Nobody is left to read the command's stdin: forward no more. */
            close_fd(&in_p[1]);
            o->wait_status = si.si_code == CLD_EXITED ? (si.si_status & 0xff) << 8
                                                      : (si.si_status & 0x7f);
            /* Nothing of the tree may outlive the top process: kill the group now; the
             * pid namespace (bwrap) is torn down by the kernel already, or now. */
            (void)kill(-pid, SIGKILL);
            if (ns_pidfd >= 0)
                (void)sys_pidfd_send_signal(ns_pidfd, SIGKILL);
            if (!killed) {
                /* Keep reading until EOF, but never past the deadline. */
            } else {
                exit_ms = a3s_now_ms();
            }
        }
    }
    o->mirror_deferred[0] = m.deferred[0];
    o->mirror_deferred[1] = m.deferred[1];
    /* The tree is gone: what its reader has not taken yet goes to the caller, who
     * writes it once everything of the run is released. */
    if (m.len > m.off && (o->mirror_pending = malloc(m.len - m.off)) != NULL) {
        memcpy(o->mirror_pending, m.buf + m.off, m.len - m.off);
        o->mirror_pending_len = m.len - m.off;
        o->mirror_pending_stream = m.stream;
    }
    rc = 0;

out:
    if (!keep_closed)
        close_keep(l);
    bool late = rc == 0 && ended && !killed && !reaped && pidfd >= 0;
    if (late) {
        *l->late_pidfd = pidfd; /* pid 1 and the launcher above it, exiting on their own */
        pidfd = -1;
    } else if (!reaped && pid > 0) {
        kill_tree(pid, pidfd >= 0 ? pidfd : -1, ns_pidfd);
        (void)waitpid(pid, NULL, 0);
    }
    if (!late)
        a3s_nspid_wait(ns_pidfd);
    close_fd(&out_p[0]);
    close_fd(&out_p[1]);
    close_fd(&errp[0]);
    close_fd(&errp[1]);
    close_fd(&in_p[0]);
    close_fd(&in_p[1]);
    close_fd(&ep[0]);
    close_fd(&ep[1]);
    close_fd(&null_fd);
    close_fd(&tty_slave);
    close_fd(&pidfd);
    close_fd(&ns_pidfd);
    close_fd(&tfd);
    close_fd(&warm_status);
    free(buf);
    free(feed.buf);
    a3s_mirror_close(&m);
    o->duration_ms = a3s_now_ms() - t0;
    if (rc < 0) {
        a3s_capture_free(o->cap);
        o->cap = NULL;
    }
    return rc;
}
