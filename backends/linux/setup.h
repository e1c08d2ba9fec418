/* The trusted setup step inside the sandbox: workspace mounts by file descriptor, the
 * command's identity, its seccomp filter (see setup.c and protocol.h). Part of the
 * in-sandbox launcher, never of the library. */
#ifndef A3S_SETUP_H
#define A3S_SETUP_H

#include <stdarg.h>
#include <stdbool.h>

/* openat2(2) with O_CLOEXEC, retried while a rename races with it (EAGAIN). */
int a3s_setup_openat2(int dfd, const char *path, int flags, unsigned long long resolve);
/* The mount id of what fd is open on (statx). -1 with errno. */
int a3s_setup_mnt_id(int fd, unsigned long long *id);

/* The setup step's refusal: "a3s-sandbox: setup: " and the message on stderr; -1. */
int a3s_setup_vfail(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
int a3s_setup_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Apply the records on fd A3S_FD_SETUP. On success the caller runs as the command's
 * identity with no capabilities, no_new_privs and the filter of fd A3S_FD_SECCOMP, in
 * the workspace; fds 5 and up are closed (keep_relay_fds: all but 7 and 12, the relay's
 * filter and channel). joined: a session's command (--join), in a copy of the session's
 * view, which the session's --hold made private and hardened (a3s_setup_harden): no host
 * mount can have arrived since, and none is hardened again (a mount below the workspace
 * is still looked for: a host rename moves one there). On failure a message is on stderr
 * and -1 is returned: the command must not run. */
int a3s_setup_run(bool keep_relay_fds, bool joined);

/* Once the view is private: every mount the command could reach that is not read-only,
 * nosuid and nodev (one the host made while the sandbox was starting, which arrived as
 * the host made it) made so, but for the sandbox's own /dev and /proc. -1 with a message
 * on stderr. */
int a3s_setup_harden(void);

/* No mount below the workspace ws (absolute), which a plan's evaluation refuses and one
 * the host made since may have brought (it would arrive writable, unhidden). -1 with a
 * message on stderr. */
int a3s_setup_nothing_below(const char *ws);

#endif
