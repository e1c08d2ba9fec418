/* The host-side mediator process of a mediated run (medproc.h): a3s-sandbox-mediator,
 * spawned with its descriptors at the fixed numbers of protocol.h, waited for until it
 * serves, stopped and reaped after the run. */
#include "medproc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol.h"
#include "util.h"

#define MEDIATOR_START_MS 10000 /* exec, dynamic linking, the host's own addresses */
#define MEDIATOR_STOP_MS 200    /* it returns as soon as it sees the stop */

/* *fd moved above the mediator's fixed numbers (CLOEXEC): its dup2s in the child then
 * never overwrite a source still to be moved, nor meet one already at its target (a dup2
 * onto itself would leave CLOEXEC set). */
static int fd_above_fixed(int *fd)
{
    if (*fd > A3S_MEDIATOR_FD_LAST)
        return 0;
    int hi = fcntl(*fd, F_DUPFD_CLOEXEC, A3S_MEDIATOR_FD_LAST + 1);
    if (hi < 0)
        return -1;
    close(*fd);
    *fd = hi;
    return 0;
}

/* The mediator's environment: nothing of the caller's but the two variables with which
 * resolv.conf(5) lets a process adjust its resolver (LOCALDOMAIN: the search list,
 * RES_OPTIONS: the options), so that a granted name resolves as it does for the caller's
 * own programs. The rest of name resolution is configured in files it reads itself
 * (resolv.conf, hosts, nsswitch.conf, gai.conf). Nothing else passes: the loader's and
 * malloc's variables, locales, and HOSTALIASES (it renames hosts; a grant must mean the
 * name it says) have no business in a program that connects on the command's behalf. */
static void mediator_env(const char *const *host_env, const char *envp[3])
{
    static const char *const keep[] = {"LOCALDOMAIN=", "RES_OPTIONS="};
    size_t n = 0;
    for (size_t k = 0; k < sizeof keep / sizeof keep[0]; k++)
        for (size_t i = 0; host_env && host_env[i]; i++)
            if (strncmp(host_env[i], keep[k], strlen(keep[k])) == 0) {
                envp[n++] = host_env[i]; /* the first, as getenv reads it */
                break;
            }
    envp[n] = NULL;
}

/* The mediator's word on its ready pipe: 1 when it serves, 0 when it could not (its
 * reason, printable, in msg; "" when it gave none), -1 when it said nothing in time. */
static int await_mediator(int fd, char *msg, size_t cap)
{
    char buf[256];
    size_t len = 0;
    unsigned long long deadline = a3s_now_ms() + MEDIATOR_START_MS;
    for (;;) {
        unsigned long long now = a3s_now_ms();
        if (now >= deadline)
            return -1;
        struct pollfd p = {fd, POLLIN, 0};
        int r = poll(&p, 1, (int)(deadline - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return -1;
        ssize_t got = r < 0 ? -1 : read(fd, buf + len, sizeof buf - 1 - len);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break; /* it is gone (EOF) or cannot be heard */
        len += (size_t)got;
        if (buf[0] == 'R')
            return 1;
        if (len == sizeof buf - 1)
            break;
    }
    size_t k = 0;
    for (size_t i = 1; buf[0] == 'E' && i < len && k + 1 < cap; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n' && i + 1 == len)
            break;
        msg[k++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    msg[k] = '\0';
    return 0;
}

int a3s_medproc_start(const char *path, const a3s_grant *g, size_t n, const char *const *host_env,
                      int *relay_end, a3s_medproc *m, a3s_error *err)
{
    *m = (a3s_medproc)A3S_MEDPROC_NONE;
    int chan[2] = {-1, -1}, stop[2] = {-1, -1}, ready[2] = {-1, -1};
    size_t k = 0;
    char **argv = NULL;
    char(*ports)[8] = NULL;
    char ppid[24];
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    bool have_fa = false, have_at = false, failed = false;
    int rc = -1, e = 0;
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, chan) < 0 ||
        pipe2(stop, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0 ||
        (m->denials = memfd_create("a3s-mediator-denials", MFD_CLOEXEC)) < 0 ||
        fd_above_fixed(&chan[0]) < 0 || fd_above_fixed(&stop[0]) < 0 ||
        fd_above_fixed(&m->denials) < 0 || fd_above_fixed(&ready[1]) < 0) {
        e = errno;
        goto out;
    }
    /* argv: --parent-pid PID, then each grant as --grant HOST PORT (protocol.h). */
    argv = calloc(3 * n + 4, sizeof *argv);
    ports = calloc(n ? n : 1, sizeof *ports);
    if (!argv || !ports) {
        e = ENOMEM;
        goto out;
    }
    snprintf(ppid, sizeof ppid, "%d", (int)getpid());
    argv[k++] = (char *)path;
    argv[k++] = (char *)"--parent-pid";
    argv[k++] = ppid;
    for (size_t i = 0; i < n; i++) {
        snprintf(ports[i], sizeof ports[i], "%d", g[i].port);
        argv[k++] = (char *)"--grant";
        argv[k++] = (char *)g[i].host; /* posix_spawn only reads argv */
        argv[k++] = ports[i];
    }
    argv[k] = NULL;
    /* Its fds at the fixed numbers, 0..2 on /dev/null (it never writes into the host's
     * streams); it closes everything else itself. posix_spawn returns an error number. */
    if ((e = posix_spawn_file_actions_init(&fa)) != 0)
        goto out;
    have_fa = true;
    if ((e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) != 0 ||
        (e = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&fa, 1, 2)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&fa, chan[0], A3S_MEDIATOR_FD_CHANNEL)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&fa, stop[0], A3S_MEDIATOR_FD_STOP)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&fa, m->denials, A3S_MEDIATOR_FD_DENIALS)) != 0 ||
        (e = posix_spawn_file_actions_adddup2(&fa, ready[1], A3S_MEDIATOR_FD_READY)) != 0)
        goto out;
    /* Whatever the host did to signals (blocked, ignored, handled) is not inherited. */
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    sigdelset(&all, SIGKILL);
    sigdelset(&all, SIGSTOP);
    if ((e = posix_spawnattr_init(&at)) != 0)
        goto out;
    have_at = true;
    if ((e = posix_spawnattr_setsigmask(&at, &none)) != 0 ||
        (e = posix_spawnattr_setsigdefault(&at, &all)) != 0 ||
        (e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)) != 0)
        goto out;
    const char *envp[3];
    mediator_env(host_env, envp);
    pid_t pid;
    if ((e = posix_spawn(&pid, path, &fa, &at, argv, (char *const *)envp)) != 0)
        goto out;
    m->pid = pid;
    m->pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* without one: kill by pid */
    m->stop_w = stop[1];
    stop[1] = -1;
    /* Only the mediator holds the write end now: EOF means it is gone. */
    close(ready[1]);
    ready[1] = -1;
    char why[256];
    int word = await_mediator(ready[0], why, sizeof why);
    if (word != 1) {
        free(a3s_medproc_stop(m)); /* kills and reaps it, closes the denials */
        int st = m->status;
        char how[64] = "";
        if (st != -1 && WIFEXITED(st))
            snprintf(how, sizeof how, " (exit status %d)", WEXITSTATUS(st));
        else if (st != -1 && WIFSIGNALED(st))
            snprintf(how, sizeof how, " (signal %d)", WTERMSIG(st));
        if (word < 0)
            a3s_fail(err, A3S_ERR_SETUP, "the network mediator %s did not start within %d s", path,
                     MEDIATOR_START_MS / 1000);
        else
            a3s_fail(err, A3S_ERR_SETUP, "the network mediator %s could not start%s%s%s", path, how,
                     why[0] ? ": " : "", why);
        failed = true;
        goto out;
    }
    *relay_end = chan[1];
    chan[1] = -1;
    rc = 0;
out:
    if (rc < 0 && !failed)
        a3s_fail_errno(err, A3S_ERR_SETUP, e, "cannot start the network mediator %s", path);
    if (rc < 0 && m->denials >= 0) /* never spawned: a3s_medproc_stop did not close it */
        close(m->denials);
    if (rc < 0)
        *m = (a3s_medproc)A3S_MEDPROC_NONE;
    int *fds[] = {&chan[0], &chan[1], &stop[0], &stop[1], &ready[0], &ready[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (*fds[i] >= 0)
            close(*fds[i]);
    if (have_fa)
        posix_spawn_file_actions_destroy(&fa);
    if (have_at)
        posix_spawnattr_destroy(&at);
    free(argv);
    free(ports);
    return rc;
}

char *a3s_medproc_stop(a3s_medproc *m)
{
    char *text = NULL;
    if (m->stop_w >= 0) {
        close(m->stop_w);
        m->stop_w = -1;
    }
    if (m->pid > 0) {
        /* It returns as soon as it sees the stop; one still there after a moment is
         * killed (through its pidfd when there is one: never another process). */
        bool gone = false;
        unsigned long long deadline = a3s_now_ms() + MEDIATOR_STOP_MS;
        while (m->pidfd >= 0) {
            unsigned long long now = a3s_now_ms();
            struct pollfd p = {m->pidfd, POLLIN, 0};
            int r = now < deadline ? poll(&p, 1, (int)(deadline - now)) : 0;
            if (r < 0 && errno == EINTR)
                continue;
            gone = r > 0;
            break;
        }
        if (!gone && m->pidfd >= 0)
            (void)syscall(SYS_pidfd_send_signal, m->pidfd, SIGKILL, NULL, 0);
        else if (!gone)
            (void)kill(m->pid, SIGKILL);
        if (m->pidfd >= 0)
            close(m->pidfd);
        m->pidfd = -1;
        int st;
        pid_t w;
        while ((w = waitpid(m->pid, &st, 0)) < 0 && errno == EINTR)
            ;
        m->status = w == m->pid ? st : -1;
        m->pid = -1;
    }
    if (m->denials >= 0) {
        off_t len = lseek(m->denials, 0, SEEK_END);
        /* Bounded by the mediator (first and last records, one summary line). */
        if (len > 0 && len < (1 << 20) && (text = malloc((size_t)len + 1)) != NULL) {
            ssize_t n = pread(m->denials, text, (size_t)len, 0);
            text[n > 0 ? n : 0] = '\0';
        }
        close(m->denials);
        m->denials = -1;
    }
    return text;
}
