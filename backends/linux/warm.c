/* A warm launcher, the supervisor's side (warm.h). */
#include "warm.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec.h"
#include "protocol.h"
#include "util.h"

/* How long a command waits for its warm launcher to be ready (it started when the
 * previous command did: almost always it is). Past this, a launcher is started for it. */
#define WARM_READY_MS 2000
#define WARM_MAX_FDS 12

int a3s_warm_start(a3s_warm *w, const a3s_launch *l, a3s_error *err)
{
    *w = (a3s_warm)A3S_WARM_NONE;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        for (size_t i = 0; i < l->nkeep; i++)
            close(l->keep[i].fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "warm launcher: socketpair");
    }
    a3s_launch with = *l;
    if (with.nkeep == A3S_EXEC_MAX_KEEP) {
        close(sv[0]);
        close(sv[1]);
        for (size_t i = 0; i < l->nkeep; i++)
            close(l->keep[i].fd);
        return a3s_fail(err, A3S_ERR_INTERNAL, "warm launcher: too many descriptors");
    }
    with.keep[with.nkeep++] = (a3s_fdmap){sv[1], A3S_FD_WARM, false};
    pid_t pid = a3s_exec_spawn(&with, err); /* consumes the keep fds, sv[1] too */
    if (pid < 0) {
        close(sv[0]);
        return -1;
    }
    w->pid = pid;
    w->ctl = sv[0];
    return 0;
}

/* A sealed memfd: the magic, then the argv and the environment, each a count and its
 * NUL-terminated strings (protocol.h). */
static int args_memfd(char *const *argv, char *const *envp)
{
    size_t len = sizeof A3S_WARM_ARGS_MAGIC, n[2] = {0, 0};
    char *const *v[2] = {argv, envp};
    for (int k = 0; k < 2; k++)
        for (; v[k] && v[k][n[k]]; n[k]++)
            len += strlen(v[k][n[k]]) + 1;
    len += 2 * 24;
    char *buf = malloc(len);
    if (!buf)
        return -1;
    size_t off = 0;
    memcpy(buf, A3S_WARM_ARGS_MAGIC, sizeof A3S_WARM_ARGS_MAGIC);
    off += sizeof A3S_WARM_ARGS_MAGIC;
    for (int k = 0; k < 2; k++) {
        off += (size_t)snprintf(buf + off, len - off, "%zu", n[k]) + 1;
        for (size_t i = 0; i < n[k]; i++) {
            size_t s = strlen(v[k][i]) + 1;
            memcpy(buf + off, v[k][i], s);
            off += s;
        }
    }
    int fd = memfd_create("a3s-warm-args", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd >= 0 && (a3s_write_all(fd, buf, off) < 0 ||
                    fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW |
                                               F_SEAL_SEAL) < 0)) {
        close(fd);
        fd = -1;
    }
    free(buf);
    return fd;
}

/* Its "R": it has entered the session and made the command's namespaces. Not waited
 * for once the command is cancelled (cancel_fd readable: the launcher started instead
 * is killed at once). The mount namespace that may come with it is kept in w->mnt when
 * w->hold_mnt and it is one (closed otherwise). */
static bool ready(a3s_warm *w, int cancel_fd)
{
    struct pollfd p[2] = {{w->ctl, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int r;
    do
        r = poll(p, cancel_fd >= 0 ? 2 : 1, WARM_READY_MS);
    while (r < 0 && errno == EINTR);
    if (r <= 0 || (cancel_fd >= 0 && p[1].revents) || !(p[0].revents & POLLIN))
        return false;
    char c = 0;
    struct iovec iov = {&c, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t n;
    do
        n = recvmsg(w->ctl, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    int ns = -1;
    struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&m) : NULL;
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int)))
        memcpy(&ns, CMSG_DATA(cm), sizeof ns);
    if (ns >= 0 && (!w->hold_mnt || w->mnt >= 0 || ioctl(ns, NS_GET_NSTYPE) != CLONE_NEWNS)) {
        close(ns);
        ns = -1;
    }
    if (ns >= 0)
        w->mnt = ns;
    return n == 1 && !(m.msg_flags & MSG_CTRUNC) && c == 'R';
}

pid_t a3s_warm_handover(a3s_warm *w, const a3s_launch *l, int in_fd, int out_fd,
                        int errout_fd)
{
    if (w->pid <= 0 || w->ctl < 0 || !ready(w, l->cancel_fd))
        return -1;
    int fds[WARM_MAX_FDS], tgt[WARM_MAX_FDS];
    size_t n = 0;
    int std[3] = {in_fd, out_fd, errout_fd};
    for (int k = 0; k < 3; k++) {
        fds[n] = std[k];
        tgt[n++] = k;
    }
    for (size_t i = 0; i < l->nkeep; i++) {
        if (l->keep[i].held)
            continue;
        if (n + 1 >= WARM_MAX_FDS)
            return -1;
        fds[n] = l->keep[i].fd;
        tgt[n++] = l->keep[i].target;
    }
    int args = args_memfd(l->warm_argv ? l->warm_argv : l->argv,
                          l->warm_argv ? l->warm_envp : l->envp);
    if (args < 0)
        return -1;
    fds[n] = args;
    tgt[n++] = -1;
    char payload[1 + sizeof tgt];
    payload[0] = 'W';
    memcpy(payload + 1, tgt, n * sizeof(int));
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct iovec iov = {payload, 1 + n * sizeof(int)};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = CMSG_SPACE(n * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, n * sizeof(int));
    ssize_t s;
    do
        s = sendmsg(w->ctl, &m, MSG_NOSIGNAL);
    while (s < 0 && errno == EINTR);
    close(args);
    if (s != (ssize_t)iov.iov_len)
        return -1;
    pid_t pid = w->pid;
    int status = w->status, mnt = w->mnt;
    close(w->ctl);
    *w = (a3s_warm)A3S_WARM_NONE;
    w->status = status; /* its status stays w's, for the supervisor to take */
    w->mnt = mnt;       /* and its namespace, for the caller */
    return pid;
}

void a3s_warm_discard(a3s_warm *w)
{
    if (w->status >= 0)
        close(w->status);
    if (w->mnt >= 0)
        close(w->mnt);
    if (w->ctl >= 0)
        close(w->ctl); /* an idle one ends by itself on this */
    if (w->pid > 0) {
        /* Its process group too (it made one, exec.c): bubblewrap stopped while starting
         * leaves its first child waiting forever on its parent's word, in that group
         * until it makes a session of its own. */
        (void)kill(-w->pid, SIGKILL);
        (void)kill(w->pid, SIGKILL);
        while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR) {
        }
    }
    *w = (a3s_warm)A3S_WARM_NONE;
}
