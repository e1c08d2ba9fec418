/* The session socket of the CLI (session.c): where sessions live, their ids, and the
 * frames on their connections (a 4-byte length in host order, then JSON; descriptors
 * with the first byte). */
#ifndef A3S_SESSION_IO_H
#define A3S_SESSION_IO_H

#include <stdbool.h>
#include <stddef.h>

#define A3S_SIO_ID_LEN 16
#define A3S_SIO_MAX_FRAME (8u << 20)

/* The caller's private directory of sessions, made 0700 if missing; refused (-1, errno)
 * when it is not a directory of the caller's that only the caller can enter. */
int a3s_sio_dir(char *out, size_t n);
/* A fresh random id (A3S_SIO_ID_LEN lower-case hex digits). */
int a3s_sio_new_id(char id[A3S_SIO_ID_LEN + 1]);
bool a3s_sio_valid_id(const char *id);

/* Listen on / connect to a socket path (CLOEXEC); with pidfd, a pidfd of the listening
 * process (SO_PEERCRED), or -1. */
int a3s_sio_listen(const char *path);
int a3s_sio_connect(const char *path, int *pidfd);

/* Whether the peer of a connection is the caller's uid in the caller's own user and
 * mount namespaces: a sandboxed command (always in a user namespace of its own) is not,
 * even with the same uid and the socket in reach. Fails closed: false when it cannot
 * tell. */
bool a3s_sio_peer_trusted(int conn);

/* One frame, with n descriptors on it (send), or up to n (recv: the rest -1; buf
 * malloc'd, NUL-terminated). -1 with errno. */
int a3s_sio_send(int fd, const char *buf, size_t len, const int *fds, int n);
int a3s_sio_recv(int fd, char **buf, size_t *len, int *fds, int n);

/* The worker's answer: the command's exit status. wait_rc returns it, or -1 when the
 * connection ended without one; a readable sig_fd (>= 0) shuts the sending side once,
 * which cancels the command, and the answer is still awaited. */
int a3s_sio_send_rc(int fd, int rc);
int a3s_sio_wait_rc(int fd, int sig_fd);

/* session_relay.c: `session exec`'s request sent with the caller's 0, 1, 2 (a terminal
 * among them relayed by this process through a pipe), the output relayed until the
 * worker's answer: the exit status, or -1 when the connection ended without one. A
 * readable sig_fd cancels as in a3s_sio_wait_rc. */
int a3s_sio_exec(int conn, const char *req, size_t len, int sig_fd);

#endif
