/* The sandbox's pid 1 (the supervisor's ns_pidfd, exec.c): under bubblewrap, its status
 * reports it (bwstatus.h); a session's command has no bwrap, and its launcher, pid 1 of
 * the command's pid namespace, sends a pidfd of itself with its "S" (launch.c). Once pid
 * 1 is reaped or a zombie, the kernel has ended everything else in the namespace: the
 * supervisor waits for that before a run ends, since the top process it started (bwrap,
 * a session's joining launcher) can be gone sooner when killed. */
#ifndef A3S_NSPID_H
#define A3S_NSPID_H

#include <stddef.h>
#include <sys/types.h>

/* read(2) of the launcher's fd 3 (a pipe or a socket); a pidfd that comes with the bytes
 * becomes *ns_pidfd (the caller's to close) unless one is known already. */
ssize_t a3s_nspid_read_started(int fd, char *buf, size_t len, int *ns_pidfd);

/* Kill pid 1 (if still there) and wait until it has ended: nothing of the namespace is
 * left then. No-op for -1. */
void a3s_nspid_wait(int ns_pidfd);

#endif
