/* a3s-sandbox-mediator: the host-side network mediator of one mediated run (relay/README.md), a
 * program of its own so that the library starts it with posix_spawn instead of forking
 * (relay/protocol.h, "The helper program"):
 *
 *   a3s-sandbox-mediator --parent-pid PID [--grant HOST PORT]...
 *
 * It dies with the process that spawned it, is not dumpable, keeps only its fixed
 * descriptors, checks every argument and descriptor, then serves the relay's channel
 * (a3s_mediator_serve in channel mode) until its stop pipe is closed. It tells its parent
 * on the ready pipe: "R" once serving, or "E" and why it could not. Exit status: see
 * A3S_MEDIATOR_EXIT_* (0 when it served until the stop). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mediator.h"
#include "util.h"

/* Its fixed fds and exit statuses: shared with the library (backends/linux/medproc.c). */
#include "protocol.h"

#define PROG "a3s-sandbox-mediator"

/* Why it stops, for its parent (on the ready pipe, when that is one) and for a person who
 * runs it by hand (stderr; /dev/null when the library starts it). */
static int fail(int code, const char *fmt, ...) A3S_PRINTF(2, 3);
static int fail(int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg + 1, sizeof msg - 2, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t len = 1 + ((size_t)n < sizeof msg - 2 ? (size_t)n : sizeof msg - 3);
    msg[0] = 'E';
    msg[len++] = '\n';
    struct stat st;
    int fl = fcntl(A3S_MEDIATOR_FD_READY, F_GETFL);
    if (fl >= 0 && (fl & O_ACCMODE) == O_WRONLY && fstat(A3S_MEDIATOR_FD_READY, &st) == 0 &&
        S_ISFIFO(st.st_mode))
        (void)!write(A3S_MEDIATOR_FD_READY, msg, len);
    (void)!write(STDERR_FILENO, PROG ": ", sizeof PROG + 1);
    (void)!write(STDERR_FILENO, msg + 1, len - 1);
    return code;
}

/* Decimal, digits only, no sign, no leading zero (except "0" itself), at most max. */
static int parse_uint(const char *s, long max, long *out)
{
    if (!s || *s < '0' || *s > '9' || (s[0] == '0' && s[1] != '\0') || strlen(s) > 10)
        return -1;
    long v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > max)
            return -1;
    }
    *out = v;
    return 0;
}

/* One grant from its two arguments: HOST must be exactly what a3s_grant_parse makes of
 * it (so already checked, lower-cased and canonical), PORT 0..65535. */
static int parse_grant(const char *host, const char *port, a3s_grant *g)
{
    long p;
    if (parse_uint(port, 65535, &p) < 0)
        return -1;
    size_t n = strnlen(host, A3S_GRANT_HOST_MAX + 1);
    if (n == 0 || n > A3S_GRANT_HOST_MAX || host[0] == '[')
        return -1;
    char spec[A3S_GRANT_HOST_MAX + 3];
    /* An IPv6 literal goes back into brackets; a3s_grant_parse refuses bare ones. */
    snprintf(spec, sizeof spec, strchr(host, ':') ? "[%s]" : "%s", host);
    a3s_error err;
    if (a3s_grant_parse(spec, g, &err) < 0 || g->port != 0 || strcmp(g->host, host) != 0)
        return -1;
    g->port = (int)p;
    return 0;
}

/* fd must be open and be what the protocol says; it is made CLOEXEC (nothing is executed,
 * but no descriptor of ours is ever left inheritable). */
static int check_fd(int fd, mode_t type, int accmode)
{
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fstat(fd, &st) < 0 || (st.st_mode & S_IFMT) != type ||
        (fl & O_ACCMODE) != accmode || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return -1;
    return 0;
}

static int check_channel(int fd)
{
    int domain = 0, type = 0;
    socklen_t dl = sizeof domain, tl = sizeof type;
    if (check_fd(fd, S_IFSOCK, O_RDWR) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || domain != AF_UNIX ||
        type != SOCK_SEQPACKET)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    /* First: die with the process that spawned us. One that died before this call is not
     * our parent any more, which the --parent-pid check below sees. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        return fail(A3S_MEDIATOR_EXIT_FAILED, "prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
    long parent;
    if (argc < 3 || strcmp(argv[1], "--parent-pid") != 0 ||
        parse_uint(argv[2], INT_MAX, &parent) < 0 || parent < 2)
        return fail(A3S_MEDIATOR_EXIT_USAGE,
                    "usage: " PROG " --parent-pid PID [--grant HOST PORT]... (started by the "
                    "a3s-sandbox library, with its descriptors on fds %d..%d)",
                    A3S_MEDIATOR_FD_CHANNEL, A3S_MEDIATOR_FD_LAST);
    if (getppid() != (pid_t)parent)
        return A3S_MEDIATOR_EXIT_ORPHAN; /* nobody is listening */

    /* Not dumpable: nothing running as the same user can ptrace it or copy its fds. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return fail(A3S_MEDIATOR_EXIT_FAILED, "prctl(PR_SET_DUMPABLE): %s", strerror(errno));
    /* A peer gone mid-write is an error to handle, not a reason to die. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGPIPE, &ign, NULL) < 0)
        return fail(A3S_MEDIATOR_EXIT_FAILED, "sigaction(SIGPIPE): %s", strerror(errno));
    /* Whatever the spawning host leaked past CLOEXEC is not ours to hold. */
    if (syscall(SYS_close_range, (unsigned)A3S_MEDIATOR_FD_LAST + 1, ~0U, 0) < 0)
        return fail(A3S_MEDIATOR_EXIT_FAILED, "close_range: %s", strerror(errno));

    if (check_channel(A3S_MEDIATOR_FD_CHANNEL) < 0 ||
        check_fd(A3S_MEDIATOR_FD_STOP, S_IFIFO, O_RDONLY) < 0 ||
        check_fd(A3S_MEDIATOR_FD_DENIALS, S_IFREG, O_RDWR) < 0 ||
        check_fd(A3S_MEDIATOR_FD_READY, S_IFIFO, O_WRONLY) < 0)
        return fail(A3S_MEDIATOR_EXIT_USAGE,
                    "fds %d..%d must be the relay's channel (AF_UNIX seqpacket), the stop "
                    "pipe, the denials file and the ready pipe",
                    A3S_MEDIATOR_FD_CHANNEL, A3S_MEDIATOR_FD_LAST);
    if ((argc - 3) % 3 != 0 || (argc - 3) / 3 > A3S_MAX_GRANTS)
        return fail(A3S_MEDIATOR_EXIT_USAGE, "expected --grant HOST PORT triples, at most %d",
                    A3S_MAX_GRANTS);
    size_t n = (size_t)(argc - 3) / 3;
    a3s_grant *g = calloc(n ? n : 1, sizeof *g);
    if (!g)
        return fail(A3S_MEDIATOR_EXIT_FAILED, "%s", strerror(ENOMEM));
    for (size_t i = 0; i < n; i++) {
        char **a = argv + 3 + 3 * i;
        if (strcmp(a[0], "--grant") != 0 || parse_grant(a[1], a[2], &g[i]) < 0) {
            free(g);
            return fail(A3S_MEDIATOR_EXIT_USAGE,
                        "argument %zu: expected --grant HOST PORT "
                        "(a normalized host, a port in 0..65535)",
                        3 + 3 * i);
        }
    }

    a3s_mediator_opts mo = {
        .channel = true, .notify_ready = true, .ready_fd = A3S_MEDIATOR_FD_READY};
    int rc = a3s_mediator_serve(A3S_MEDIATOR_FD_CHANNEL, A3S_MEDIATOR_FD_STOP, g, n,
                                A3S_MEDIATOR_FD_DENIALS, &mo);
    int e = errno;
    /* serve copied the grants. Connection threads may still be finishing: _exit, not
     * exit, so that nothing is torn down under them (their clients see the close). */
    free(g);
    if (rc < 0)
        _exit(fail(A3S_MEDIATOR_EXIT_FAILED, "cannot serve: %s", strerror(e)));
    _exit(A3S_MEDIATOR_EXIT_STOPPED);
}
