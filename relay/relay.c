/* a3s-sandbox-relay: the first program inside a mediated sandbox (SPEC §6).
 *
 *   a3s-sandbox-relay --unix PATH [--http HOST:PORT] [--socks HOST:PORT] --filter-fd N
 *                     -- PROGRAM [ARG...]
 *
 * It listens on the two loopback proxy ports of the sandbox's private network namespace
 * and relays every accepted TCP connection, byte for byte, to a fresh connection on the
 * host mediator's Unix socket (the mediator tells HTTP from SOCKS by the first byte). Then
 * it starts PROGRAM (the launcher) as its child under a stricter seccomp filter read from
 * fd N, which takes AF_UNIX away from the command: only the relay, which is not under
 * that filter, ever talks to the mediator. fds 3 and 4 (the launcher's supervisor pipe
 * and bwrap's status pipe) pass to the child untouched; the relay drops its own copies.
 * The relay exits with the child's status (128+N for a signal), closing everything.
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define PROG "a3s-sandbox-relay"
#define EXIT_SETUP 125
#define FD_SUPERVISOR 3
#define FD_BWRAP_STATUS 4
#define DEFAULT_HTTP "127.0.0.1:24731"
#define DEFAULT_SOCKS "127.0.0.1:24732"
#define MAX_CONNS 256
#define BUF_SIZE 16384
/* fds kept free for the listeners, the pidfd, stdio and the odd accept in flight */
#define FD_RESERVE 32
/* after EMFILE and friends the listeners rest one round this long, instead of spinning */
#define ACCEPT_PAUSE_MS 100
#define ACCEPT_BATCH 64

/* One direction of a connection: bytes read from src, waiting to be written to dst.
 * eof: src ended (EOF or error); shut: dst got shutdown(SHUT_WR) or is unusable;
 * dead: dst refused a write, so what src still sends is read and dropped. */
typedef struct half {
    size_t off, len;
    int eof, shut, dead;
    char data[BUF_SIZE];
} half;

typedef struct conn {
    int tcp, ux;
    int connecting; /* the Unix connect is still in progress */
    half up;        /* tcp -> unix */
    half down;      /* unix -> tcp */
} conn;

typedef struct relay {
    int listen[2];
    int pidfd;
    pid_t child;
    struct sockaddr_un mediator;
    socklen_t mediator_len;
    size_t cap;
    size_t n;
    conn *c[MAX_CONNS];
    struct pollfd pfd[3 + 2 * MAX_CONNS];
} relay;

static void usage(FILE *f)
{
    fputs("usage: " PROG " --unix PATH [--http HOST:PORT] [--socks HOST:PORT]\n"
          "                         --filter-fd N -- PROGRAM [ARG...]\n"
          "\n"
          "Listens on HOST:PORT (IPv4 loopback; defaults --http " DEFAULT_HTTP
          ", --socks " DEFAULT_SOCKS ")\n"
          "and relays each TCP connection to a fresh connection on the Unix socket PATH.\n"
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
    return EXIT_SETUP;
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

/* How many connections fit the fd limit: two fds each, a reserve kept aside. */
static size_t conn_cap(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return MAX_CONNS;
    if (rl.rlim_cur <= FD_RESERVE + 2)
        return 1;
    rlim_t cap = (rl.rlim_cur - FD_RESERVE) / 2;
    return cap < MAX_CONNS ? (size_t)cap : MAX_CONNS;
}

static void conn_close(conn *c)
{
    (void)close(c->tcp);
    (void)close(c->ux);
    free(c);
}

/* Move what can move in one direction: one read from src (when there is room), one
 * write to dst (when there is data), and the half-close once src ended and everything
 * was delivered. A read error ends src like EOF does: what was read still goes out (a
 * Unix peer that closes with unread input makes us read ECONNRESET right after its last
 * reply). A failed write kills only this direction, and src is then drained and dropped:
 * a mediator that refuses and closes while the client still sends a body has queued its
 * reply the other way, and a client that sends everything before reading must get it. */
static void pump(int src, int dst, half *h, int *progress)
{
    if (!h->eof) {
        if (h->off + h->len == BUF_SIZE && h->off > 0) {
            memmove(h->data, h->data + h->off, h->len);
            h->off = 0;
        }
        size_t room = BUF_SIZE - h->off - h->len;
        if (room > 0) {
            ssize_t r = recv(src, h->data + h->off + h->len, room, MSG_DONTWAIT);
            if (r > 0) {
                if (!h->dead)
                    h->len += (size_t)r;
                *progress = 1;
            } else if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                h->eof = 1;
                *progress = 1;
            }
        }
    }
    if (h->len > 0) {
        ssize_t w = send(dst, h->data + h->off, h->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w > 0) {
            h->off += (size_t)w;
            h->len -= (size_t)w;
            if (h->len == 0)
                h->off = 0;
            *progress = 1;
        } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            h->dead = h->shut = 1;
            h->off = h->len = 0;
            *progress = 1;
        }
    }
    if (h->eof && h->len == 0 && !h->shut) {
        /* dst may be gone entirely already; the other direction finds out. */
        (void)shutdown(dst, SHUT_WR);
        h->shut = 1;
        *progress = 1;
    }
}

static int finished(const half *h)
{
    return h->eof && h->len == 0 && h->shut;
}

/* Service one connection after poll; returns 1 when it is over (to be closed). */
static int conn_service(conn *c, short tre, short ure)
{
    const short bad = POLLERR | POLLHUP | POLLNVAL;
    if (c->connecting) {
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(c->ux, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0 || soerr != 0)
            return 1; /* the mediator is not there: drop the client */
        if (!(ure & POLLOUT))
            return (ure & bad) ? 1 : 0;
        c->connecting = 0;
    }
    int progress = 0;
    pump(c->tcp, c->ux, &c->up, &progress);
    pump(c->ux, c->tcp, &c->down, &progress);
    if (finished(&c->up) && finished(&c->down))
        return 1;
    /* A hang-up or error that moved nothing would be reported again at once: end the
     * connection rather than spin. */
    if (!progress && ((tre | ure) & bad))
        return 1;
    return 0;
}

static short interest(const half *in, const half *out)
{
    short ev = 0;
    if (!in->eof && in->len < BUF_SIZE)
        ev |= POLLIN;
    if (out->len > 0)
        ev |= POLLOUT;
    return ev;
}

/* Accept what is pending on one listener. Returns 1 when accepting must pause (out of
 * fds or memory), 0 otherwise. */
static int accept_some(relay *r, int lfd)
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
        if (r->n >= r->cap) {
            (void)close(t); /* over the cap: refused at once */
            continue;
        }
        int u = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (u < 0) {
            (void)close(t);
            return 1;
        }
        int connecting = 0;
        if (connect(u, (const struct sockaddr *)&r->mediator, r->mediator_len) < 0) {
            if (errno != EINPROGRESS) {
                /* No mediator, or its backlog is full: the client is dropped. */
                (void)close(u);
                (void)close(t);
                continue;
            }
            connecting = 1;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            (void)close(u);
            (void)close(t);
            return 1;
        }
        c->tcp = t;
        c->ux = u;
        c->connecting = connecting;
        r->c[r->n++] = c;
    }
    return 0;
}

static void close_all(relay *r)
{
    for (size_t i = 0; i < r->n; i++)
        conn_close(r->c[i]);
    r->n = 0;
    for (int i = 0; i < 2; i++) {
        if (r->listen[i] >= 0)
            (void)close(r->listen[i]);
        r->listen[i] = -1;
    }
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return EXIT_SETUP;
}

static int reap(relay *r)
{
    int status;
    while (waitpid(r->child, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, PROG ": waiting for the command: %s\n", strerror(errno));
            return EXIT_SETUP;
        }
    }
    return exit_code(status);
}

/* The event loop: relay bytes until the child exits, then return its exit code. */
static int serve(relay *r)
{
    int paused = 0;
    for (;;) {
        struct pollfd *p = r->pfd;
        p[0] = (struct pollfd){.fd = r->pidfd, .events = POLLIN};
        for (int i = 0; i < 2; i++)
            p[1 + i] = (struct pollfd){.fd = paused ? -1 : r->listen[i], .events = POLLIN};
        size_t nconn = r->n;
        for (size_t i = 0; i < nconn; i++) {
            conn *c = r->c[i];
            short te, ue;
            if (c->connecting) {
                te = 0;
                ue = POLLOUT;
            } else {
                te = interest(&c->up, &c->down);
                ue = interest(&c->down, &c->up);
            }
            /* An fd with nothing wanted stays out, so its hang-up cannot wake us in vain. */
            p[3 + 2 * i] = (struct pollfd){.fd = te ? c->tcp : -1, .events = te};
            p[4 + 2 * i] = (struct pollfd){.fd = ue ? c->ux : -1, .events = ue};
        }
        int n = poll(p, 3 + 2 * nconn, paused ? ACCEPT_PAUSE_MS : -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* Without poll nothing can be relayed; the command still gets its status. */
            fprintf(stderr, PROG ": poll: %s; the network relay stops\n", strerror(errno));
            close_all(r);
            return reap(r);
        }
        paused = 0;
        if (p[0].revents) {
            close_all(r);
            return reap(r);
        }
        size_t kept = 0;
        for (size_t i = 0; i < nconn; i++) {
            conn *c = r->c[i];
            short tre = p[3 + 2 * i].revents, ure = p[4 + 2 * i].revents;
            if ((tre || ure) && conn_service(c, tre, ure)) {
                conn_close(c);
                continue;
            }
            r->c[kept++] = c;
        }
        /* connections accepted during this round were appended after nconn */
        for (size_t i = nconn; i < r->n; i++)
            r->c[kept++] = r->c[i];
        r->n = kept;
        for (int i = 0; i < 2; i++) {
            if (p[1 + i].revents && accept_some(r, r->listen[i]))
                paused = 1;
        }
    }
}

typedef struct opts {
    const char *unix_path, *http, *socks, *filter_arg;
    char **cmd;
} opts;

/* -1 when the relay should go on, else the exit code (usage printed, or an error). */
static int parse_args(int argc, char **argv, opts *o)
{
    *o = (opts){.http = DEFAULT_HTTP, .socks = DEFAULT_SOCKS};
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
        const char **slot = strcmp(a, "--unix") == 0        ? &o->unix_path
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
    if (!o->unix_path)
        return setup_error("missing --unix PATH");
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
        _exit(EXIT_SETUP);
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

    struct sockaddr_un mediator = {.sun_family = AF_UNIX};
    size_t plen = strlen(o.unix_path);
    if (plen == 0 || plen >= sizeof mediator.sun_path)
        return setup_error("--unix %s: not a usable socket path (empty or too long)",
                           o.unix_path);
    memcpy(mediator.sun_path, o.unix_path, plen + 1);
    struct sockaddr_in sa_http, sa_socks;
    if (parse_addr(o.http, &sa_http) < 0)
        return setup_error("--http %s: expected 127.x.y.z:PORT with PORT in 1..65535", o.http);
    if (parse_addr(o.socks, &sa_socks) < 0)
        return setup_error("--socks %s: expected 127.x.y.z:PORT with PORT in 1..65535",
                           o.socks);
    /* The filter fd must not be one the protocol or stdio owns. */
    int filter_fd = parse_fd(o.filter_arg);
    if (filter_fd <= STDERR_FILENO || filter_fd == FD_SUPERVISOR ||
        filter_fd == FD_BWRAP_STATUS)
        return setup_error("--filter-fd %s: not a usable file descriptor", o.filter_arg);

    /* fds 3 and 4 are the child's, to be dropped by the relay after the fork; when they
     * are not open now, the relay's own sockets may take those numbers and must stay. */
    int inherited3 = fcntl(FD_SUPERVISOR, F_GETFD) >= 0;
    int inherited4 = fcntl(FD_BWRAP_STATUS, F_GETFD) >= 0;

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
    r->mediator = mediator;
    r->mediator_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + plen + 1);
    r->cap = conn_cap();
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
        exec_command(o.cmd, &prog, &old_pipe);
    }
    /* The protocol pipes belong to the child alone: their ends must close when it ends. */
    if (inherited3)
        (void)close(FD_SUPERVISOR);
    if (inherited4)
        (void)close(FD_BWRAP_STATUS);

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
