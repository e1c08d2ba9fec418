/* The output mirror: one chunk of a stream's head at a time, written to the caller's fd
 * only when poll says it is writable and never with a write that can block, so the
 * supervisor never waits on a reader that does not read (its deadline must keep
 * running) and never raises SIGPIPE. */
#ifndef A3S_MIRROR_H
#define A3S_MIRROR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct a3s_mirror {
    int fd[2];     /* stdout, stderr targets (the caller's); -1: not mirrored (any more) */
    int wfd[2];    /* what is written to: a private non-blocking reopen, or -1 (fd) */
    bool sock[2];  /* fd is a socket: send(MSG_DONTWAIT) instead */
    bool deferred[2]; /* a pipe or terminal we may not reopen: written after the run */
    bool wrote[2]; /* the command wrote to this stream */
    char *buf;     /* the one chunk waiting for its reader */
    size_t len, off;
    int stream; /* of that chunk: 1 stdout, 2 stderr */
} a3s_mirror;

/* Set up for the caller's fds (-1: that stream is not mirrored); cap: the largest chunk.
 * A pipe, FIFO or terminal is reopened through /proc/self/fd with O_NONBLOCK (a file
 * description of our own: the caller's flags stay as they are). Returns -1 on ENOMEM. */
int a3s_mirror_open(a3s_mirror *m, int out_fd, int err_fd, size_t cap);
void a3s_mirror_close(a3s_mirror *m);

/* poll reported revents on mirror fd k (0 stdout, 1 stderr): write some of the pending
 * chunk, or (nothing pending) notice a reader that went away (POLLERR/POLLHUP). Returns
 * -1 when the reader is gone, else 0. */
int a3s_mirror_step(a3s_mirror *m, int k, short revents);

/* Write all of p to fd (the tree is gone: no deadline any more), waiting for the reader
 * without a blocking write, and giving up when cancel_fd (may be -1) becomes readable.
 * Returns 0, -1 when the reader is gone, -2 when cancelled. */
int a3s_mirror_drain(int fd, const char *p, size_t n, int cancel_fd);

#endif
