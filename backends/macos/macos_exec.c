/* Running under Seatbelt (macos_exec.h), compiled on macOS only: `sandbox-exec -p PROFILE`
 * in a process group of its own (set by the child and by the parent, so no signal can go
 * to a group not yet made), its output read into the capture, and the whole group killed
 * at the deadline, on cancel or when the observer asks. POSIX calls only; every fd made
 * here is close-on-exec (pipe + fcntl: macOS has no pipe2). */
#include "macos_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capture.h"
#include "util.h"

int a3s_macos_scratch_make(const char *tmp, char **out, a3s_error *err)
{
    char *dir = NULL;
    if (asprintf(&dir, "%s/a3s-sandbox-XXXXXX", tmp) < 0)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    if (!mkdtemp(dir)) {
        int e = errno;
        free(dir);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "scratch dir: mkdtemp in %s", tmp);
    }
    *out = dir;
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    (void)(type == FTW_DP ? rmdir(path) : unlink(path)); /* best effort: the run is over */
    return 0;
}

void a3s_macos_scratch_remove(const char *dir)
{
    /* FTW_PHYS: a link the command left is removed, never followed. */
    (void)nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static int cloexec_pipe(int p[2])
{
    if (pipe(p) < 0)
        return -1;
    if (fcntl(p[0], F_SETFD, FD_CLOEXEC) < 0 || fcntl(p[1], F_SETFD, FD_CLOEXEC) < 0) {
        int e = errno;
        (void)close(p[0]);
        (void)close(p[1]);
        errno = e;
        return -1;
    }
    return 0;
}

static int set_limit(int res, int64_t v)
{
    struct rlimit rl = {.rlim_cur = (rlim_t)v, .rlim_max = (rlim_t)v};
    return setrlimit(res, &rl);
}

/* In the child: its own group, its fds, its limits, then sandbox-exec. Only
 * async-signal-safe calls; any failure ends the child with 127 and the reason on fd 2. */
static void child(const a3s_macos_cmd *cmd, const a3s_run_io *io, int in_fd, int out_fd,
                  int err_fd)
{
    (void)setpgid(0, 0);
    int in = io->stdin_fd >= 0 ? io->stdin_fd : in_fd;
    if (dup2(in, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0 ||
        chdir(cmd->cwd) < 0 || set_limit(RLIMIT_NOFILE, cmd->nofile) < 0 ||
        set_limit(RLIMIT_CORE, cmd->core_bytes) < 0 ||
        (cmd->file_size_bytes > 0 && set_limit(RLIMIT_FSIZE, cmd->file_size_bytes) < 0) ||
        signal(SIGPIPE, SIG_DFL) == SIG_ERR)
        _exit(127);
    execve(cmd->argv[0], cmd->argv, cmd->envp);
    static const char msg[] = "a3s-sandbox: cannot execute /usr/bin/sandbox-exec\n";
    (void)write(2, msg, sizeof msg - 1);
    _exit(127);
}

/* Reads what is there on fd into the capture; 0 at EOF (fd closed), 1 more to come, -1
 * the observer asked to stop. */
static int drain(int *fd, int stream, a3s_capture *cap, const a3s_run_io *io)
{
    char b[16384];
    ssize_t n = read(*fd, b, sizeof b);
    if (n < 0 && errno == EINTR)
        return 1;
    if (n <= 0) {
        (void)close(*fd);
        *fd = -1;
        return 0;
    }
    size_t head = a3s_capture_feed(cap, stream, b, (size_t)n);
    if (io->on_output && io->on_output(io->output_ud, stream, b, (size_t)n, head) != 0)
        return -1;
    return 1;
}

/* Supervise pid (its group) until both pipes closed and it exited, or the deadline. Once
 * the group is killed, the leader's exit ends the wait: a process that left the group
 * (setsid) and holds a pipe open is not waited for. */
static void supervise(pid_t pid, int fds[2], const a3s_run_io *io, a3s_outcome *o)
{
    unsigned long long deadline = a3s_now_ms() + (unsigned long long)io->timeout_ms;
    bool killed = false, reaped = false;
    int st = 0;
    while ((fds[0] >= 0 || fds[1] >= 0) && !reaped) {
        struct pollfd p[3] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}, {io->cancel_fd, POLLIN, 0}};
        unsigned long long now = a3s_now_ms();
        int wait = now >= deadline ? 0 : (int)(deadline - now > 1000 ? 1000 : deadline - now);
        if (killed)
            wait = 100; /* only the leader's exit is waited for now */
        int r = poll(p, io->cancel_fd >= 0 ? 3 : 2, wait);
        if (r < 0 && errno != EINTR)
            break;
        if (!killed && a3s_now_ms() >= deadline) {
            o->timed_out = killed = true;
            (void)killpg(pid, SIGKILL);
        }
        if (!killed && io->cancel_fd >= 0 && p[2].revents) {
            o->aborted = killed = true;
            (void)killpg(pid, SIGKILL);
        }
        for (int k = 0; k < 2 && r > 0; k++)
            if (fds[k] >= 0 && p[k].revents && drain(&fds[k], k + 1, o->cap, io) < 0 && !killed) {
                o->aborted = killed = true;
                (void)killpg(pid, SIGKILL);
            }
        if (killed && waitpid(pid, &st, WNOHANG) == pid)
            reaped = true;
    }
    for (int k = 0; k < 2; k++)
        if (fds[k] >= 0)
            (void)close(fds[k]);
    while (!reaped && waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    (void)killpg(pid, SIGKILL); /* whatever of the group outlived its leader */
    o->wait_status = st;
}

int a3s_macos_exec(const a3s_macos_cmd *cmd, const a3s_run_io *io, a3s_outcome *o,
                   a3s_error *err)
{
    if (io->tty_fd >= 0)
        return a3s_fail(err, A3S_ERR_SETUP, "macos-seatbelt: terminal sessions are not supported");
    /* Input data is written before anything is read: what a pipe holds, at most. */
    if (io->stdin_fd < 0 && io->stdin_data && io->stdin_len > 16384)
        return a3s_fail(err, A3S_ERR_SETUP, "macos-seatbelt: input data over 16 KiB is not "
                        "supported (give it as a pipe)");
    if (!(o->cap = a3s_capture_new((size_t)cmd->output_bytes)))
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    int in[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1};
    if (cloexec_pipe(in) < 0 || cloexec_pipe(out) < 0 || cloexec_pipe(er) < 0) {
        int e = errno;
        for (int i = 0; i < 2; i++) {
            if (in[i] >= 0)
                (void)close(in[i]);
            if (out[i] >= 0)
                (void)close(out[i]);
            if (er[i] >= 0)
                (void)close(er[i]);
        }
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "pipe");
    }
    unsigned long long t0 = a3s_now_ms();
    pid_t pid = fork();
    if (pid == 0)
        child(cmd, io, in[0], out[1], er[1]);
    int e = errno;
    (void)close(in[0]);
    (void)close(out[1]);
    (void)close(er[1]);
    if (pid < 0) {
        (void)close(in[1]);
        (void)close(out[0]);
        (void)close(er[0]);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "fork");
    }
    (void)setpgid(pid, pid); /* EACCES once it exec'd: the child made its group already */
    o->started = true;
    if (io->stdin_fd < 0 && io->stdin_data && io->stdin_len > 0 &&
        a3s_write_all(in[1], io->stdin_data, io->stdin_len) < 0) {
        (void)killpg(pid, SIGKILL);
        o->aborted = true;
    }
    (void)close(in[1]);
    int fds[2] = {out[0], er[0]};
    supervise(pid, fds, io, o);
    o->mirror_deferred[0] = o->mirror_deferred[1] = io->mirror; /* no live mirror here */
    o->reported_exit = -1;
    o->duration_ms = a3s_now_ms() - t0;
    return 0;
}
