/* The output mirror of a supervised launch (see a3s_launch.mirror in exec.h). */
#include "mirror.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

static bool reader_gone(int e)
{
    return e == EPIPE || e == ECONNRESET;
}

int a3s_mirror_open(a3s_mirror *m, int out_fd, int err_fd, size_t cap)
{
    *m = (a3s_mirror){.fd = {out_fd, err_fd}, .wfd = {-1, -1}};
    for (int k = 0; k < 2; k++) {
        struct stat st;
        int fl = m->fd[k] >= 0 ? fcntl(m->fd[k], F_GETFL) : -1;
        if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY || (fl & O_PATH) || fstat(m->fd[k], &st) < 0) {
            m->fd[k] = -1; /* not open for writing: nothing to mirror to */
            continue;
        }
        if (S_ISSOCK(st.st_mode)) {
            m->sock[k] = true;
        } else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
            /* A blocking write to a pipe or terminal that polls writable can still sleep
             * (a terminal with little room, another writer filling the pipe). ENXIO (a
             * FIFO without reader) or EACCES: the caller's fd, PIPE_BUF writes. */
            char path[64];
            snprintf(path, sizeof path, "/proc/self/fd/%d", m->fd[k]);
            m->wfd[k] = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            if (m->wfd[k] < 0) {
                /* One we may not open again (a terminal of another user: `su`): no write
                 * to it is safe while the deadline runs (a terminal that polls writable
                 * may have room for one byte), and its flags are shared: the whole
                 * stream is written once the tree is gone. */
                m->deferred[k] = true;
                m->fd[k] = -1;
            }
        }
    }
    if (!(m->buf = malloc(cap))) {
        a3s_mirror_close(m);
        return -1;
    }
    return 0;
}

void a3s_mirror_close(a3s_mirror *m)
{
    for (int k = 0; k < 2; k++)
        if (m->wfd[k] >= 0)
            close(m->wfd[k]);
    m->wfd[0] = m->wfd[1] = -1;
    free(m->buf);
    m->buf = NULL;
}

static ssize_t mirror_write(const a3s_mirror *m, int k, const char *p, size_t n)
{
    if (m->sock[k]) {
        ssize_t w;
        do
            w = send(m->fd[k], p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        return w;
    }
    /* A background job writing to its terminal with TOSTOP set would be stopped by
     * SIGTTOU (the whole host process, and with it the deadline): with SIGTTOU blocked
     * the kernel lets the write through instead. */
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    if (pthread_sigmask(SIG_BLOCK, &ttou, &old) != 0)
        return -1;
    ssize_t w;
    if (m->wfd[k] >= 0)
        w = a3s_write_nosigpipe(m->wfd[k], p, n);
    else
        w = a3s_write_nosigpipe(m->fd[k], p, n); /* a regular file: does not block */
    int saved = errno;
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return w;
}

/* Other write errors than a gone reader end mirroring of that fd (the capture still has
 * everything). */
int a3s_mirror_step(a3s_mirror *m, int k, short revents)
{
    if (!(m->len > m->off && m->stream == k + 1)) {
        /* Watching only: POLLERR on a pipe or socket whose reader went away. */
        return (revents & (POLLERR | POLLHUP)) ? -1 : 0;
    }
    ssize_t w = mirror_write(m, k, m->buf + m->off, m->len - m->off);
    if (w < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        if (reader_gone(errno)) {
            m->len = m->off = 0;
            m->fd[0] = m->fd[1] = -1;
            return -1;
        }
        int dead = m->fd[k];
        for (int j = 0; j < 2; j++)
            if (m->fd[j] == dead)
                m->fd[j] = -1;
        m->len = m->off = 0;
        return 0;
    }
    m->off += (size_t)w;
    if (m->off == m->len)
        m->len = m->off = 0;
    return 0;
}

int a3s_mirror_drain(int fd, const char *p, size_t n, int cancel_fd)
{
    a3s_mirror m;
    if (a3s_mirror_open(&m, fd, -1, 1) < 0 || m.fd[0] < 0) {
        /* Could not be reopened non-blocking: the tree is gone, a blocking write is
         * only the caller's own wait now. */
        bool deferred = m.deferred[0];
        a3s_mirror_close(&m);
        if (!deferred)
            return 0;
        /* Blocking writes of at most PIPE_BUF bytes once there is room (never more than
         * that waits for a reader that left with the caller): a cancel (a session's
         * client gone, its session stopping) still ends the wait. */
        while (n > 0) {
            struct pollfd pf[2] = {{fd, POLLOUT, 0}, {cancel_fd, POLLIN, 0}};
            int r = poll(pf, cancel_fd >= 0 ? 2 : 1, -1);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return 0;
            if (cancel_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
                return -2;
            if (pf[0].revents & (POLLERR | POLLNVAL))
                return pf[0].revents & POLLERR ? -1 : 0;
            if (!(pf[0].revents & (POLLOUT | POLLHUP)))
                continue;
            size_t chunk = n < PIPE_BUF ? n : PIPE_BUF;
            ssize_t w = a3s_write_nosigpipe(fd, p, chunk);
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return reader_gone(errno) ? -1 : 0;
            p += w;
            n -= (size_t)w;
        }
        return 0;
    }
    int rc = 0;
    while (n > 0) {
        struct pollfd pf[2] = {{fd, POLLOUT, 0}, {cancel_fd, POLLIN, 0}};
        int r = poll(pf, cancel_fd >= 0 ? 2 : 1, -1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (cancel_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            rc = -2;
            break;
        }
        ssize_t w = mirror_write(&m, 0, p, n);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            rc = reader_gone(errno) ? -1 : 0;
            break;
        }
        p += w;
        n -= (size_t)w;
    }
    a3s_mirror_close(&m);
    return rc;
}
