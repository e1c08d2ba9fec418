/* The fixtures of the seccomp unit tests (test_seccomp_*.c, backends/linux/seccomp.c):
 * every case runs in a forked child that loads the filter and makes one raw syscall; the
 * child's exit status carries errno (0 on success) and the parent asserts it. Where the
 * kernel's own answer could be mistaken for the filter's, the same call is also made
 * unfiltered (a "control") and must differ. Plans are filled directly (engine/plan.c is
 * not needed). */
#ifndef A3S_SECCOMP_FIXTURE_H
#define A3S_SECCOMP_FIXTURE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "a3s_seccomp.h"
#include "tap.h"

#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef KEYCTL_GET_KEYRING_ID
#define KEYCTL_GET_KEYRING_ID 0
#endif

#define X32_BIT 0x40000000L
#define EXIT_LOAD_FAILED 250 /* child: the filter could not be loaded */
#define EXIT_OTHER 251       /* child: the probe itself misbehaved */

/* One raw syscall. */
typedef struct call {
    long nr;
    unsigned long a[6];
} call;

/* Probe result: errno (0 = success) when the child exited, -signal when it was killed. */
static inline int decode(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return -WTERMSIG(status);
    return -1000;
}

static inline void child_quiet(void)
{
    /* a seccomp kill dumps core; keep the test directory clean */
    struct rlimit rl = {0, 0};
    setrlimit(RLIMIT_CORE, &rl);
}

static inline int child_make_call(const call *c)
{
    errno = 0;
    long r = syscall(c->nr, c->a[0], c->a[1], c->a[2], c->a[3], c->a[4], c->a[5]);
    if (r < 0)
        return errno ? errno : EXIT_OTHER;
    if (c->nr == SYS_clone) {
        /* a raw clone without a stack behaves like fork: the copy leaves at once */
        if (r == 0)
            _exit(0);
        int st;
        if (waitpid((pid_t)r, &st, 0) != (pid_t)r)
            return EXIT_OTHER;
    }
    return 0;
}

/* Run body(ud) in a child, under the filter built from sp (or unfiltered when sp is
 * NULL); the child exits with what body returns. Its decoded status. */
static inline int probe_child(const a3s_seccomp_plan *sp, int (*body)(void *), void *ud)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -2000;
    if (pid == 0) {
        child_quiet();
        a3s_error err;
        if (sp && a3s_seccomp_load(sp, &err) < 0)
            _exit(EXIT_LOAD_FAILED);
        _exit(body(ud));
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -3000;
    return decode(st);
}

static inline int call_body(void *ud)
{
    return child_make_call(ud);
}

/* Run c in a child, under the filter built from sp (or unfiltered when sp is NULL). */
static inline int probe(const a3s_seccomp_plan *sp, call c)
{
    return probe_child(sp, call_body, &c);
}

static inline call mk(long nr, unsigned long a0, unsigned long a1, unsigned long a2,
                      unsigned long a3)
{
    call c = {nr, {a0, a1, a2, a3, 0, 0}};
    return c;
}

static int sv[2];

static inline call c_socket(unsigned long domain)
{
    return mk(SYS_socket, domain, SOCK_DGRAM, 0, 0);
}

static inline call c_socketpair(unsigned long domain)
{
    return mk(SYS_socketpair, domain, SOCK_STREAM, 0, (unsigned long)(uintptr_t)sv);
}

static inline call c_ioctl(unsigned long req)
{
    /* fd -1: unfiltered the kernel answers EBADF, and nothing reaches a real terminal */
    return mk(SYS_ioctl, (unsigned long)-1L, req, 0, 0);
}

static inline call c_clone(unsigned long flags)
{
    return mk(SYS_clone, flags, 0, 0, 0);
}

static inline int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* ---- plans (filled directly: engine/plan.c is not needed) ---- */

static a3s_sc_rule baseline_deny[] = {
    {.syscall = "keyctl", .errnum = EPERM},
    {.syscall = "unshare", .errnum = EPERM},
    {.syscall = "setns", .errnum = EPERM},
    /* known to libseccomp, not a syscall on x86_64/aarch64: skipped silently */
    {.syscall = "arm_fadvise64_64", .errnum = EPERM},
    /* an exact duplicate is harmless */
    {.syscall = "keyctl", .errnum = EPERM},
};

static inline a3s_seccomp_plan baseline_plan(void)
{
    a3s_seccomp_plan p;
    memset(&p, 0, sizeof p);
    p.deny = baseline_deny;
    p.ndeny = p.capdeny = sizeof baseline_deny / sizeof baseline_deny[0];
    p.socketpair_unix = true;
    p.deny_clone_ns = true;
    p.deny_tty_inject = true;
    p.socket_errnum = EAFNOSUPPORT;
    return p;
}

#endif
