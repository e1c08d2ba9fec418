/* See stdin_feed.h. */
#include "stdin_feed.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "util.h"

/* A background reader of a terminal retries this much later (see a3s_stdin_read). */
#define TTY_BACKGROUND_RETRY_MS 100

/* Which caller fds the command may hold itself. Only a read-only pipe or FIFO: nothing
 * can be done with one but reading it. Everything else would hand the command more than
 * its input: a terminal (write to the caller's screen past the capture, ioctls such as
 * stty on the caller's terminal), a socket or a writable fd (talk back), a device. Not
 * even a read-only regular file: the command could reopen /proc/self/fd/0 for writing,
 * which reaches the file through the host's mount, not the sandbox's. Those are read by
 * the supervisor and forwarded through a fresh pipe instead. */
int a3s_stdin_route(int fd, stdin_route *route, src_kind *kind, a3s_error *err)
{
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fstat(fd, &st) < 0)
        return a3s_fail_errno(err, A3S_ERR_INVALID, errno, "spawn: stdin fd %d", fd);
    *kind = SRC_OTHER;
    if (S_ISFIFO(st.st_mode) && !(fl & O_PATH) && (fl & O_ACCMODE) == O_RDONLY)
        *route = STDIN_DIRECT;
    else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
        *route = STDIN_NULL; /* /dev/null: a fresh read-only one of ours does the same */
    else if ((fl & O_PATH) || (fl & O_ACCMODE) == O_WRONLY)
        *route = STDIN_NULL; /* nothing to read (and it would never poll readable) */
    else
        *route = STDIN_FORWARD;
    if (isatty(fd))
        *kind = SRC_TTY;
    else if (S_ISSOCK(st.st_mode))
        *kind = SRC_SOCKET;
    else if (S_ISREG(st.st_mode))
        *kind = SRC_FILE;
    return 0;
}

/* One read from the caller's fd after poll reported it ready, without ever blocking the
 * supervisor (its deadline must keep running) and without changing the fd's status
 * flags, which the caller shares with other processes (a shell's terminal): so no
 * O_NONBLOCK; each kind is read in a way that returns at once instead. Returns > 0
 * bytes, 0 at EOF, -1 with errno (EAGAIN: nothing now, try again later). */
ssize_t a3s_stdin_read(stdin_feed *f, size_t cap)
{
    ssize_t r;
    switch (f->kind) {
    case SRC_SOCKET:
        do
            r = recv(f->src, f->buf, cap, MSG_DONTWAIT);
        while (r < 0 && errno == EINTR);
        return r;
    case SRC_FILE:
        /* A private offset: the caller's stays where it was, so a shell loop reading the
         * same file (while read ...; do a3s-sandbox ...; done <list) is not eaten by our
         * read-ahead. Regular files never block. */
        if (f->pos >= 0) {
            do
                r = pread(f->src, f->buf, cap, f->pos);
            while (r < 0 && errno == EINTR);
            if (r > 0)
                f->pos += r;
            if (r >= 0 || errno != ESPIPE)
                return r;
            f->pos = -1;
        }
        return a3s_read_retry(f->src, f->buf, cap);
    case SRC_TTY: {
        /* Read no more than is queued (TIOCINQ): such a read returns at once in canonical
         * and in raw mode. Readable with nothing queued is an EOF (^D) or a hangup, which
         * a 1-byte read reports at once. */
        int queued = 0;
        if (ioctl(f->src, FIONREAD, &queued) < 0 || queued <= 0)
            queued = 1;
        if ((size_t)queued < cap)
            cap = (size_t)queued;
        /* A read from a background process group would stop the whole host process with
         * SIGTTIN; with SIGTTIN blocked the kernel fails the read with EIO instead. */
        sigset_t ttin, old;
        sigemptyset(&ttin);
        sigaddset(&ttin, SIGTTIN);
        int e = pthread_sigmask(SIG_BLOCK, &ttin, &old);
        if (e != 0) {
            errno = e;
            return -1;
        }
        r = a3s_read_retry(f->src, f->buf, cap);
        int saved = errno;
        (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
        errno = saved;
        if (r < 0 && saved == EIO) {
            pid_t fg = tcgetpgrp(f->src);
            if (fg > 0 && fg != getpgrp()) {
                /* In the background: the input belongs to the foreground job. Wait
                 * (bounded, polled) until we are brought back instead of reading. */
                f->resume_ms = a3s_now_ms() + TTY_BACKGROUND_RETRY_MS;
                errno = EAGAIN;
            } else {
                errno = saved;
            }
        }
        return r;
    }
    default:
        return a3s_read_retry(f->src, f->buf, cap);
    }
}

/* Write what is pending. Returns false when the pipe is finished (the command closed its
 * end, or a hard error): the caller then closes it. */
bool a3s_stdin_feed_write(stdin_feed *f, int pipe_fd)
{
    while (f->left > 0) {
        ssize_t w = a3s_write_nosigpipe(pipe_fd, f->pend, f->left);
        if (w < 0)
            return errno == EAGAIN;
        f->pend += w;
        f->left -= (size_t)w;
    }
    return true;
}
