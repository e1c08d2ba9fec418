/* The CLI's session sockets and their frames (session_io.h). */
#include "session_io.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>


/* A directory of the caller's that nobody else can enter (lstat: never a link). */
static bool private_dir(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
           (st.st_mode & 077) == 0;
}

int a3s_sio_dir(char *out, size_t n)
{
    char run[64];
    snprintf(run, sizeof run, "/run/user/%u", (unsigned)getuid());
    if (private_dir(run))
        snprintf(out, n, "%s/a3s-sandbox-sessions", run);
    else
        snprintf(out, n, "/tmp/a3s-sandbox-sessions-%u", (unsigned)getuid());
    if (mkdir(out, 0700) < 0 && errno != EEXIST)
        return -1;
    if (!private_dir(out)) {
        errno = EPERM; /* squatted, or opened to others: never used */
        return -1;
    }
    return 0;
}

int a3s_sio_new_id(char id[A3S_SIO_ID_LEN + 1])
{
    unsigned char r[A3S_SIO_ID_LEN / 2];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return -1;
    for (size_t i = 0; i < sizeof r; i++)
        snprintf(id + 2 * i, 3, "%02x", r[i]);
    return 0;
}

bool a3s_sio_valid_id(const char *id)
{
    size_t i = 0;
    for (; id[i]; i++)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return false;
    return i == A3S_SIO_ID_LEN;
}

static int addr_of(const char *path, struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a->sun_path, path, strlen(path));
    return 0;
}

int a3s_sio_listen(const char *path)
{
    struct sockaddr_un a;
    if (addr_of(path, &a) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    mode_t old = umask(077);
    int rc = bind(fd, (struct sockaddr *)&a, sizeof a);
    umask(old);
    if (rc < 0 || listen(fd, 64) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int a3s_sio_connect(const char *path, int *pidfd)
{
    struct sockaddr_un a;
    if (pidfd)
        *pidfd = -1;
    if (addr_of(path, &a) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    /* Only a supervisor of the caller's own serves there (the directory is private). */
    if (cr.uid != getuid()) {
        close(fd);
        errno = EPERM;
        return -1;
    }
    if (pidfd)
        *pidfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
    return fd;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

bool a3s_sio_peer_trusted(int conn)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != getuid() ||
        cr.pid <= 0)
        return false;
    /* The peer as a pidfd (the kernel's, race-free), else opened by pid; its user
     * namespace read through /proc, then the pidfd says whether that pid was still the
     * peer when it was read. */
    int pfd = -1;
    socklen_t pl = sizeof pfd;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERPIDFD, &pfd, &pl) < 0 || pfd < 0)
        pfd = (int)syscall(SYS_pidfd_open, cr.pid, 0);
    if (pfd < 0)
        return false;
    /* Its user and mount namespaces must be ours: the paths it sends (the guard's) and
     * what the policy reads are resolved here, in our view of the files. */
    bool ok = true;
    static const char *const ns[2] = {"user", "mnt"};
    for (int i = 0; i < 2 && ok; i++) {
        char theirs_p[64], ours_p[64];
        snprintf(theirs_p, sizeof theirs_p, "/proc/%ld/ns/%s", (long)cr.pid, ns[i]);
        snprintf(ours_p, sizeof ours_p, "/proc/self/ns/%s", ns[i]);
        struct stat theirs, ours;
        ok = stat(theirs_p, &theirs) == 0 && stat(ours_p, &ours) == 0 &&
             theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
    }
    ok = ok && syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) == 0;
    close(pfd);
    return ok;
}

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            if (r == 0)
                errno = ECONNRESET;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int a3s_sio_send(int fd, const char *buf, size_t len, const int *fds, int n)
{
    if (len > A3S_SIO_MAX_FRAME) {
        errno = E2BIG;
        return -1;
    }
    uint32_t l = (uint32_t)len;
    struct iovec iov = {&l, sizeof l};
    union {
        char b[CMSG_SPACE(sizeof(int) * 3)];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0 && n <= 3) {
        m.msg_control = u.b;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)n);
    }
    ssize_t w;
    do
        w = sendmsg(fd, &m, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w != (ssize_t)sizeof l)
        return -1; /* 4 bytes always fit an empty socket buffer */
    return write_all(fd, buf, len);
}

int a3s_sio_recv(int fd, char **buf, size_t *len, int *fds, int n)
{
    *buf = NULL;
    for (int i = 0; i < n; i++)
        fds[i] = -1;
    uint32_t l;
    struct iovec iov = {&l, sizeof l};
    union {
        char b[CMSG_SPACE(sizeof(int) * 3)];
        struct cmsghdr align;
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
                       .msg_controllen = sizeof u.b};
    ssize_t r;
    do
        r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    while (r < 0 && errno == EINTR);
    int got = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); r > 0 && c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int d;
            memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof d);
            if (got < n)
                fds[got++] = d;
            else
                close(d);
        }
    }
    if (r != (ssize_t)sizeof l || l > A3S_SIO_MAX_FRAME || !(*buf = malloc((size_t)l + 1))) {
        errno = r < 0 ? errno : EPROTO;
        return -1;
    }
    if (read_all(fd, *buf, l) < 0) {
        free(*buf);
        *buf = NULL;
        return -1;
    }
    (*buf)[l] = '\0';
    *len = l;
    return 0;
}

int a3s_sio_send_rc(int fd, int rc)
{
    char b[32];
    int n = snprintf(b, sizeof b, "{\"rc\":%d}", rc);
    return a3s_sio_send(fd, b, (size_t)n, NULL, 0);
}

int a3s_sio_wait_rc(int fd, int sig_fd)
{
    bool shut = false;
    for (;;) {
        struct pollfd pf[2] = {{fd, POLLIN, 0}, {sig_fd, POLLIN, 0}};
        int pr = poll(pf, sig_fd >= 0 && !shut ? 2 : 1, -1);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr < 0)
            return -1;
        if (!shut && sig_fd >= 0 && (pf[1].revents & POLLIN)) {
            (void)shutdown(fd, SHUT_WR); /* the worker's cancel */
            shut = true;
        }
        if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        char *buf;
        size_t len;
        int none[1];
        if (a3s_sio_recv(fd, &buf, &len, none, 0) < 0)
            return -1;
        /* Exactly what a3s_sio_send_rc writes: {"rc":N}. */
        int v = -1, end = 0;
        if (sscanf(buf, "{\"rc\":%d}%n", &v, &end) != 1 || end <= 0 || (size_t)end != len)
            v = -1;
        free(buf);
        return v;
    }
}
