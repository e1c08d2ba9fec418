/* a3s-sandbox-relay: the first program inside a mediated sandbox (relay/README.md).
 *
 *   a3s-sandbox-relay --channel-fd C [--http HOST:PORT] [--socks HOST:PORT] --filter-fd N
 *                     -- PROGRAM [ARG...]
 *
 * It listens on the two loopback proxy ports of the sandbox's private network namespace
 * and hands every accepted TCP connection, as a file descriptor (SCM_RIGHTS), to the host
 * mediator over fd C: a connected AF_UNIX socket made before the sandbox started. So no
 * path is ever looked up after the command starts, the relay opens no AF_UNIX socket, and
 * the mediator reads and answers the command's connection itself. Then it starts PROGRAM
 * (the launcher) as its child under a seccomp filter read from fd N. The relay is not
 * dumpable: the command, which runs as the same user, cannot ptrace it or take its fds.
 * fds 3 and 4 (the launcher's supervisor pipe and bwrap's status pipe) pass to the child
 * untouched; the relay drops its own copies. The relay exits with the child's status
 * (128+N for a signal), closing everything.
 *
 * Any setup failure: a message on stderr and exit 125, before the command runs.
 * Built static: it starts fast and depends on nothing in the sandbox. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Fixed fds, default addresses, exit status: shared with the supervisor. */
#include "protocol.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define PROG "a3s-sandbox-relay"
/* after EMFILE and friends the listeners rest one round this long, instead of spinning */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_BATCH 64

typedef struct relay {
    int listen[2];
    int channel;
    int pidfd;
    pid_t child;
} relay;

static void usage(FILE *f)
{
    fputs("usage: " PROG " --channel-fd C [--http HOST:PORT] [--socks HOST:PORT]\n"
          "                         --filter-fd N -- PROGRAM [ARG...]\n"
          "\n"
          "Listens on HOST:PORT (IPv4 loopback; defaults --http " A3S_RELAY_HTTP
          ", --socks " A3S_RELAY_SOCKS ")\n"
          "and hands each accepted TCP connection to the mediator over the socket on fd C.\n"
          "PROGRAM runs as a child under the seccomp BPF program read from fd N;\n"
          "the relay exits with its status (128+N when killed by signal N).\n",
          f);
}

static int setup_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int setup_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return A3S_EXIT_SETUP;
}

/* "A.B.C.D:PORT" with a 127/8 address and a port in 1..65535: the proxies must never be
 * reachable from outside the sandbox, even if the namespace were missing. */
static int parse_addr(const char *spec, struct sockaddr_in *sa)
{
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || (size_t)(colon - spec) >= INET_ADDRSTRLEN)
        return -1;
    char host[INET_ADDRSTRLEN];
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
        return -1;
    if ((ntohl(sa->sin_addr.s_addr) >> 24) != 127)
        return -1;
    const char *p = colon + 1;
    if (*p < '0' || *p > '9')
        return -1;
    char *end;
    errno = 0;
    long port = strtol(p, &end, 10);
    if (errno || *end || port < 1 || port > 65535)
        return -1;
    sa->sin_port = htons((uint16_t)port);
    return 0;
}

static int parse_fd(const char *s)
{
    if (*s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v > INT_MAX)
        return -1;
    return (int)v;
}

static int open_listener(const struct sockaddr_in *sa, const char *spec, int *out)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return setup_error("cannot create the listener for %s: %s", spec, strerror(errno));
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        bind(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        (void)close(fd);
        return setup_error("cannot listen on %s: %s", spec, strerror(e));
    }
    *out = fd;
    return 0;
}

/* The whole BPF program from fd (a sealed memfd at offset 0, or anything readable). */
static int read_filter(int fd, struct sock_filter **out, unsigned short *len)
{
    const size_t max = (size_t)BPF_MAXINSNS * sizeof(struct sock_filter);
    char *buf = malloc(max + 1);
    if (!buf)
        return setup_error("reading the command filter: %s", strerror(ENOMEM));
    size_t n = 0;
    while (n <= max) {
        ssize_t r = read(fd, buf + n, max + 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            free(buf);
            return setup_error("cannot read the command filter: %s", strerror(e));
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (n == 0 || n > max || n % sizeof(struct sock_filter)) {
        free(buf);
        return setup_error("the command filter is not a BPF program (%s bytes)",
                           n > max ? "too many" : n == 0 ? "no" : "a partial instruction in its");
    }
    *out = (struct sock_filter *)(void *)buf;
    *len = (unsigned short)(n / sizeof(struct sock_filter));
    return 0;
}

/* Hand one accepted connection to the mediator: one byte naming the port ('H' HTTP,
 * 'S' SOCKS) with the fd attached. A mediator that cannot take it now (gone, or its
 * queue full) means the client is dropped, never served some other way. */
static void hand_over(int channel, int fd, char kind)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct iovec iov = {.iov_base = &kind, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    while (sendmsg(channel, &m, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR)
        ;
    (void)close(fd);
}

/* Accept what is pending on one listener. Returns 1 when accepting must pause (out of
 * fds or memory), 0 otherwise. */
static int accept_some(relay *r, int lfd, char kind)
{
    for (int k = 0; k < ACCEPT_BATCH; k++) {
        int t = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (t < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return 1; /* EMFILE, ENFILE, ENOBUFS, ENOMEM, or worse: rest a moment */
        }
        hand_over(r->channel, t, kind);
    }
    return 0;
}

static void close_all(relay *r)
{
    for (int i = 0; i < 2; i++) {
        if (r->listen[i] >= 0)
            (void)close(r->listen[i]);
        r->listen[i] = -1;
    }
    if (r->channel >= 0)
        (void)close(r->channel);
    r->channel = -1;
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return A3S_EXIT_SETUP;
}

static int reap(relay *r)
{
    int status;
    while (waitpid(r->child, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, PROG ": waiting for the command: %s\n", strerror(errno));
            return A3S_EXIT_SETUP;
        }
    }
    return exit_code(status);
}

/* The event loop: hand connections over until the child exits, then return its exit
 * code. */
static int serve(relay *r)
{
    int paused = 0;
    for (;;) {
        struct pollfd p[3] = {{r->pidfd, POLLIN, 0},
                              {paused ? -1 : r->listen[0], POLLIN, 0},
                              {paused ? -1 : r->listen[1], POLLIN, 0}};
        int n = poll(p, 3, paused ? ACCEPT_PAUSE_MS : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* Without poll nothing can be handed over; the command still gets its status. */
            fprintf(stderr, PROG ": poll: %s; the network relay stops\n", strerror(errno));
            close_all(r);
            return reap(r);
        }
        paused = 0;
        if (p[0].revents) {
            close_all(r);
            return reap(r);
        }
        if (p[1].revents && accept_some(r, r->listen[0], 'H'))
            paused = 1;
        if (p[2].revents && accept_some(r, r->listen[1], 'S'))
            paused = 1;
    }
}

typedef struct opts {
    const char *channel_arg, *http, *socks, *filter_arg;
    char **cmd;
} opts;

/* -1 when the relay should go on, else the exit code (usage printed, or an error). */
static int parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){.http = A3S_RELAY_HTTP, .socks = A3S_RELAY_SOCKS};
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        const char **slot = strcmp(a, "--channel-fd") == 0 ? &o->channel_arg
                            : strcmp(a, "--http") == 0      ? &o->http
                            : strcmp(a, "--socks") == 0     ? &o->socks
                            : strcmp(a, "--filter-fd") == 0 ? &o->filter_arg
                                                            : NULL;
        if (!slot)
            return setup_error("unknown argument '%s' (see --help)", a);
        if (i + 1 >= argc)
            return setup_error("%s needs a value", a);
        *slot = argv[++i];
    }
    if (!o->channel_arg)
        return setup_error("missing --channel-fd C");
    if (!o->filter_arg)
        return setup_error("missing --filter-fd N");
    if (i >= argc)
        return setup_error("missing the command after --");
    o->cmd = argv + i;
    return -1;
}

/* In the child: the command's filter, then the command; never returns. */
static void exec_command(char **cmd, const struct sock_fprog *prog,
                         const struct sigaction *old_pipe) __attribute__((noreturn));
static void exec_command(char **cmd, const struct sock_fprog *prog,
                         const struct sigaction *old_pipe)
{
    (void)sigaction(SIGPIPE, old_pipe, NULL);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) < 0) {
        /* Never run the command without its filter. */
        fprintf(stderr, PROG ": cannot install the command's seccomp filter: %s\n",
                strerror(errno));
        _exit(A3S_EXIT_SETUP);
    }
    execvp(cmd[0], cmd);
    int e = errno;
    if (e == ENOENT || e == ENOTDIR) {
        fprintf(stderr, PROG ": %s: command not found\n", cmd[0]);
        _exit(127);
    }
    fprintf(stderr, PROG ": %s: cannot execute: %s\n", cmd[0], strerror(e));
    _exit(126);
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;

    /* The launcher's embedded image (protocol.h): the child starts it by its path
     * (/proc/self/fd/N), and CLOEXEC drops it with that very exec. */
    if (fcntl(A3S_FD_LAUNCHER_IMAGE, F_SETFD, FD_CLOEXEC) < 0 && errno != EBADF)
        return setup_error("the launcher's image: %s", strerror(errno));

    /* Not dumpable: the command (same uid) can neither ptrace the relay nor copy its
     * channel with pidfd_getfd. The child becomes dumpable again by its exec. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return setup_error("prctl(PR_SET_DUMPABLE): %s", strerror(errno));
    struct sockaddr_in sa_http, sa_socks;
    if (parse_addr(o.http, &sa_http) < 0)
        return setup_error("--http %s: expected 127.x.y.z:PORT with PORT in 1..65535", o.http);
    if (parse_addr(o.socks, &sa_socks) < 0)
        return setup_error("--socks %s: expected 127.x.y.z:PORT with PORT in 1..65535",
                           o.socks);
    /* The filter fd must not be one the protocol or stdio owns. */
    int filter_fd = parse_fd(o.filter_arg);
    if (filter_fd <= STDERR_FILENO || filter_fd == A3S_FD_STARTED || filter_fd == A3S_FD_STATUS)
        return setup_error("--filter-fd %s: not a usable file descriptor", o.filter_arg);
    /* The channel: a connected AF_UNIX socket, kept from the command (CLOEXEC). */
    int channel = parse_fd(o.channel_arg);
    int domain = 0, type = 0;
    socklen_t dl = sizeof domain, tl = sizeof type;
    if (channel <= STDERR_FILENO || channel == A3S_FD_STARTED || channel == A3S_FD_STATUS ||
        channel == filter_fd || getsockopt(channel, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 ||
        getsockopt(channel, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || domain != AF_UNIX ||
        fcntl(channel, F_SETFD, FD_CLOEXEC) < 0)
        return setup_error("--channel-fd %s: not a usable Unix socket", o.channel_arg);

    /* fds 3 and 4 are the child's, to be dropped by the relay after the fork; when they
     * are not open now, the relay's own sockets may take those numbers and must stay. */
    int inherited3 = fcntl(A3S_FD_STARTED, F_GETFD) >= 0;
    int inherited4 = fcntl(A3S_FD_STATUS, F_GETFD) >= 0;

    /* Writes to a vanished peer must be errors, not death; the child gets the
     * disposition back before exec. */
    struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
    sigemptyset(&ign.sa_mask);
    if (sigaction(SIGPIPE, &ign, &old_pipe) < 0)
        return setup_error("sigaction: %s", strerror(errno));

    struct sock_filter *insns = NULL;
    unsigned short ninsns = 0;
    rc = read_filter(filter_fd, &insns, &ninsns);
    (void)close(filter_fd);
    if (rc)
        return rc;
    struct sock_fprog prog = {.len = ninsns, .filter = insns};

    relay *r = calloc(1, sizeof *r);
    if (!r) {
        free(insns);
        return setup_error("%s", strerror(ENOMEM));
    }
    r->listen[0] = r->listen[1] = r->pidfd = -1;
    r->channel = channel;
    if ((rc = open_listener(&sa_http, o.http, &r->listen[0])) ||
        (rc = open_listener(&sa_socks, o.socks, &r->listen[1])))
        goto out;

    /* pidfd_open must work before the command starts, or the relay could not wait. */
    int probe = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (probe < 0) {
        rc = setup_error("pidfd_open: %s (Linux 5.3 or newer is needed)", strerror(errno));
        goto out;
    }
    (void)close(probe);
    (void)fflush(NULL);

    r->child = fork();
    if (r->child < 0) {
        rc = setup_error("cannot start %s: %s", o.cmd[0], strerror(errno));
        goto out;
    }
    if (r->child == 0) {
        (void)close(r->listen[0]);
        (void)close(r->listen[1]);
        (void)close(r->channel);
        exec_command(o.cmd, &prog, &old_pipe);
    }
    /* The protocol pipes belong to the child alone: their ends must close when it ends. */
    if (inherited3)
        (void)close(A3S_FD_STARTED);
    if (inherited4)
        (void)close(A3S_FD_STATUS);

    r->pidfd = (int)syscall(SYS_pidfd_open, r->child, 0);
    if (r->pidfd < 0) {
        fprintf(stderr, PROG ": pidfd_open: %s; the network relay stops\n", strerror(errno));
        close_all(r);
        rc = reap(r);
    } else {
        rc = serve(r);
        (void)close(r->pidfd);
    }
out:
    close_all(r);
    free(insns);
    free(r);
    return rc;
}
