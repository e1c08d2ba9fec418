/* The output mirror of a supervised launch (see a3s_launch.mirror in exec.h). */
#include "mirror.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>

#include "util.h"

static bool reader_gone(int e)
{
    return e == EPIPE || e == ECONNRESET;
}

/* Write at most PIPE_BUF bytes: a pipe that polls writable takes that much without
 * blocking. Other write errors than a gone reader end mirroring of that fd (the capture
 * still has everything). */
int a3s_mirror_step(a3s_mirror *m, int k, short revents)
{
    if (!(m->len > m->off && m->stream == k + 1)) {
        /* Watching only: POLLERR on a pipe or socket whose reader went away. */
        return (revents & (POLLERR | POLLHUP)) ? -1 : 0;
    }
    size_t n = m->len - m->off;
    if (n > PIPE_BUF)
        n = PIPE_BUF;
    ssize_t w = a3s_write_nosigpipe(m->fd[k], m->buf + m->off, n);
    if (w < 0) {
        if (errno == EAGAIN)
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

int a3s_mirror_flush(a3s_mirror *m)
{
    int fd = m->fd[m->stream - 1];
    int rc = fd >= 0 ? a3s_write_all_nosigpipe(fd, m->buf + m->off, m->len - m->off) : 0;
    m->len = m->off = 0;
    return rc < 0 && reader_gone(errno) ? -1 : 0;
}
