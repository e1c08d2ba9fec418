/* The output mirror: one chunk of a stream's head at a time, written to the caller's fd
 * only when poll says it is writable, so the supervisor never blocks on a reader that
 * does not read (its deadline must keep running) and never raises SIGPIPE. */
#ifndef A3S_MIRROR_H
#define A3S_MIRROR_H

#include <stdbool.h>
#include <stddef.h>

typedef struct a3s_mirror {
    int fd[2];     /* stdout, stderr targets; -1: not mirrored (any more) */
    bool wrote[2]; /* the command wrote to this stream */
    char *buf;     /* the one chunk waiting for its reader (caller-allocated) */
    size_t len, off;
    int stream; /* of that chunk: 1 stdout, 2 stderr */
} a3s_mirror;

/* poll reported revents on mirror fd k (0 stdout, 1 stderr): write some of the pending
 * chunk, or (nothing pending) notice a reader that went away (POLLERR/POLLHUP). Returns
 * -1 when the reader is gone, else 0. */
int a3s_mirror_step(a3s_mirror *m, int k, short revents);
/* Write what is pending, blocking (the tree is gone). -1 when the reader is gone. */
int a3s_mirror_flush(a3s_mirror *m);

#endif
