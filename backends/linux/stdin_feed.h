/* The command's stdin as the supervisor feeds it (exec.c): which caller fds the command
 * may hold itself, and reading the others without blocking and without changing their
 * flags, to forward them through a pipe (or into a pty master). */
#ifndef A3S_STDIN_FEED_H
#define A3S_STDIN_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "a3s_sandbox.h"

/* A read of the caller's fd forwards at most this much at a time. */
#define A3S_STDIN_CHUNK 65536

typedef enum { STDIN_NULL, STDIN_DIRECT, STDIN_FORWARD } stdin_route;
typedef enum { SRC_OTHER, SRC_TTY, SRC_SOCKET, SRC_FILE } src_kind;

/* What the supervisor feeds into the command's stdin pipe: stdin_data, or what it reads
 * from the caller's fd. */
typedef struct stdin_feed {
    int src; /* caller's fd to forward (not owned), -1: none or finished */
    src_kind kind;
    off_t pos;        /* SRC_FILE: private read offset, -1: plain read */
    char *buf;        /* A3S_STDIN_CHUNK bytes for forwarding */
    const char *pend; /* bytes not yet written into the pipe */
    size_t left;
    unsigned long long resume_ms; /* no read before this (background terminal) */
} stdin_feed;

/* How the caller's fd reaches the command, and how it is read when forwarded. */
int a3s_stdin_route(int fd, stdin_route *route, src_kind *kind, a3s_error *err);
/* One read from f->src once poll said ready: > 0 bytes, 0 at EOF, -1 with errno (EAGAIN:
 * nothing now, try again later). */
ssize_t a3s_stdin_read(stdin_feed *f, size_t cap);
/* Write what is pending into fd; false when it is finished (closed by the command, or a
 * hard error). */
bool a3s_stdin_feed_write(stdin_feed *f, int fd);

#endif
