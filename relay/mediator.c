/* The host-side network mediator for grants (relay/README.md).
 *
 * Every read is bounded while it happens (the head buffer never grows), every wait has a
 * deadline, the decision is made on the parsed origin before any upstream byte, names are
 * resolved here and refused when they land on internal addresses or on one of the host's
 * own (unless the grant is that IP literal; the unspecified address never), and the first
 * acceptable address that answers is pinned for the connection. Plain HTTP is one request
 * per connection, so that the upstream never sees a request that was not decided, and the
 * refusal records stay bounded however many refusals there are. */
#include "mediator.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mediator_addr.h"
#include "mediator_deny.h"
#include "mediator_parse.h"
#include "util.h"

#define RELAY_BUF 16384
#define LINGER_MS 250      /* how long a refused client gets to read its answer */
#define LINGER_BYTES 65536
#define THREAD_STACK (512 * 1024) /* getaddrinfo and NSS need some room, not 8 MiB */

/* ------------------------------------------------------------------ serving */

typedef struct med_ctx {
    pthread_mutex_t lock; /* guards active, serving and the denial log */
    int active;           /* connection threads alive */
    bool serving;         /* a3s_mediator_serve has not returned yet */
    int denial_fd;        /* our own duplicate (or -1): threads may outlive the caller's fd */
    int connect_ms, idle_ms, max_conns;
    size_t n;
    a3s_grant *g;
    a3s_deny_log deny;
    a3s_host_addrs own; /* its lock is taken alone, never with `lock` */
    bool own_ready; /* own.lock initialised */
} med_ctx;

typedef struct relay_dir {
    char buf[RELAY_BUF];
    size_t off, len;
    bool eof;
} relay_dir;

typedef struct conn {
    med_ctx *ctx;
    int fd; /* the client (the in-sandbox relay) */
    int up; /* the pinned upstream, or -1 */
    size_t len;
    unsigned char buf[A3S_HTTP_HEAD_MAX];
    relay_dir dir[2]; /* 0: client -> upstream, 1: upstream -> client */
} conn;

/* The last one out (the server or a connection thread) frees the context. The server's
 * own release is its stop: that is when the last records and the summary go out. */
static void ctx_release(med_ctx *ctx, bool is_conn)
{
    pthread_mutex_lock(&ctx->lock);
    if (is_conn)
        ctx->active--;
    else
        ctx->serving = false;
    if (!is_conn)
        a3s_deny_log_close(&ctx->deny, ctx->denial_fd);
    bool last = !ctx->serving && ctx->active == 0;
    pthread_mutex_unlock(&ctx->lock);
    if (!last)
        return;
    if (ctx->denial_fd >= 0)
        close(ctx->denial_fd);
    if (ctx->own_ready)
        a3s_host_addrs_free(&ctx->own);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->deny.ring);
    free(ctx->g);
    free(ctx);
}

/* One record per refusal, bounded (mediator_deny.h); only the parsed origin, never header
 * values or bodies. reason must be a static string (it is counted by name). */
static void deny_record(med_ctx *ctx, const char *proto, const char *host, int port,
                        const char *reason)
{
    if (ctx->denial_fd < 0)
        return;
    char line[A3S_DENY_LINE_MAX];
    size_t len = a3s_deny_format(line, sizeof line, proto, host, port, reason);
    pthread_mutex_lock(&ctx->lock);
    a3s_deny_log_add(&ctx->deny, ctx->denial_fd, line, len, reason);
    pthread_mutex_unlock(&ctx->lock);
}

/* ------------------------------------------------------------------ I/O */

static long long remaining(unsigned long long deadline)
{
    unsigned long long now = a3s_now_ms();
    return now >= deadline ? 0 : (long long)(deadline - now);
}

static int poll_one(int fd, short ev, unsigned long long deadline)
{
    for (;;) {
        long long left = remaining(deadline);
        struct pollfd p = {fd, ev, 0};
        int rc = poll(&p, 1, left > 0x7fffffff ? 0x7fffffff : (int)left);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            errno = ETIMEDOUT;
        return rc;
    }
}

/* Send everything before the deadline (fds are non-blocking). 0 or -1. */
static int send_all(int fd, const void *data, size_t len, unsigned long long deadline)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                return -1;
            if (poll_one(fd, POLLOUT, deadline) <= 0)
                return -1;
            continue;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Read more of the request into the bounded buffer: >0 bytes, 0 EOF, -1 timeout/error. */
static ssize_t read_more(conn *c, unsigned long long deadline)
{
    if (c->len >= sizeof c->buf)
        return -1; /* unreachable: the parsers refuse before the buffer is full */
    for (;;) {
        if (poll_one(c->fd, POLLIN, deadline) <= 0)
            return -1;
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof c->buf - c->len, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n > 0)
            c->len += (size_t)n;
        return n;
    }
}

/* Answer and hang up so that the client reads the answer rather than a reset: half-close,
 * drain what it is still sending for a short while, then close. */
static void refuse(conn *c, const void *msg, size_t len)
{
    unsigned long long deadline = a3s_now_ms() + LINGER_MS;
    if (len)
        (void)send_all(c->fd, msg, len, deadline);
    (void)shutdown(c->fd, SHUT_WR);
    char sink[4096];
    for (size_t drained = 0; drained < LINGER_BYTES;) {
        if (poll_one(c->fd, POLLIN, deadline) <= 0)
            break;
        ssize_t n = recv(c->fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            break;
        drained += (size_t)n;
    }
    close(c->fd);
    c->fd = -1;
}

#define HTTP_REFUSAL(status) "HTTP/1.1 " status "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
static const char resp_400[] = HTTP_REFUSAL("400 Bad Request");
static const char resp_403[] = HTTP_REFUSAL("403 Forbidden");
static const char resp_502[] = HTTP_REFUSAL("502 Bad Gateway");
static const char resp_503[] = HTTP_REFUSAL("503 Service Unavailable");
static const char resp_504[] = HTTP_REFUSAL("504 Gateway Timeout");
static const char resp_200[] = "HTTP/1.1 200 Connection established\r\n\r\n";

enum { UP_OK, UP_INTERNAL, UP_RESOLVE, UP_REFUSED, UP_NETUNREACH, UP_UNREACH, UP_TIMEOUT };

static int try_connect(const struct addrinfo *ai, unsigned long long deadline, int *fd_out)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return errno;
    int e = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        e = errno;
        if (e == EINPROGRESS || e == EINTR) {
            if (poll_one(fd, POLLOUT, deadline) <= 0) {
                e = errno ? errno : ETIMEDOUT;
            } else {
                socklen_t sl = sizeof e;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl) < 0)
                    e = errno;
            }
        }
    }
    if (e) {
        close(fd);
        return e;
    }
    *fd_out = fd;
    return 0;
}


/* Resolve on the host, drop the addresses a3s_upstream_acceptable refuses, and connect to the
 * first acceptable address that answers before the deadline; that address is pinned. */
static int upstream_open(conn *c, const char *host, int port)
{
    struct sockaddr_storage lit;
    bool literal = a3s_addr_literal(host, &lit);
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = AI_NUMERICSERV | (literal ? AI_NUMERICHOST : 0);
    char ps[8];
    snprintf(ps, sizeof ps, "%d", port);
    struct addrinfo *res = NULL;
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res)
        return UP_RESOLVE;
    unsigned long long deadline = a3s_now_ms() + (unsigned long long)c->ctx->connect_ms;
    bool saw_internal = false, tried = false;
    int last = 0;
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        if (!a3s_upstream_acceptable(&c->ctx->own, ai->ai_addr, literal)) {
            saw_internal = true;
            continue;
        }
        tried = true;
        int fd = -1;
        last = try_connect(ai, deadline, &fd);
        if (last == 0) {
            c->up = fd;
            freeaddrinfo(res);
            return UP_OK;
        }
        if (remaining(deadline) == 0)
            break;
    }
    freeaddrinfo(res);
    if (!tried)
        return saw_internal ? UP_INTERNAL : UP_RESOLVE;
    switch (last) {
    case ECONNREFUSED:
        return UP_REFUSED;
    case ENETUNREACH:
        return UP_NETUNREACH;
    case ETIMEDOUT:
        return UP_TIMEOUT;
    default:
        return UP_UNREACH;
    }
}

#define RELAY_UNLIMITED UINT64_MAX

/* Copy both ways until both sides are done, an error, or idle_ms without any traffic.
 * At most `budget` bytes go from the client to the upstream (RELAY_UNLIMITED: no limit);
 * once they have, the client is no longer read at all (what it sends stays unread) and
 * the upstream's write side stays open (servers may take a half-close for an abort). */
static void relay(conn *c, uint64_t budget)
{
    int fds[2] = {c->fd, c->up};
    for (;;) {
        struct pollfd p[2] = {{fds[0], 0, 0}, {fds[1], 0, 0}};
        bool done = true;
        for (int d = 0; d < 2; d++) {
            relay_dir *r = &c->dir[d];
            bool spent = d == 0 && budget == 0;
            if (!r->eof && !spent && r->len == 0)
                p[d].events |= POLLIN;
            if (r->len > 0)
                p[1 - d].events |= POLLOUT;
            if ((!r->eof && !spent) || r->len > 0)
                done = false;
        }
        if (done)
            return;
        for (int i = 0; i < 2; i++)
            if (!p[i].events)
                p[i].fd = -1; /* a hung-up fd nobody waits on must not spin poll */
        int rc = poll(p, 2, c->ctx->idle_ms);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc <= 0)
            return; /* idle timeout or failure */
        for (int d = 0; d < 2; d++) {
            relay_dir *r = &c->dir[d];
            int from = fds[d], to = fds[1 - d];
            if (r->len > 0 && p[1 - d].revents) {
                ssize_t w = send(to, r->buf + r->off, r->len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    return;
                if (w > 0) {
                    r->off += (size_t)w;
                    r->len -= (size_t)w;
                    if (r->len == 0) {
                        r->off = 0;
                        if (r->eof)
                            (void)shutdown(to, SHUT_WR);
                    }
                }
            }
            bool spent = d == 0 && budget == 0;
            if (!r->eof && !spent && r->len == 0 && p[d].revents) {
                size_t want = sizeof r->buf;
                if (d == 0 && budget < want)
                    want = (size_t)budget;
                ssize_t n = recv(from, r->buf, want, MSG_DONTWAIT);
                if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                    return;
                if (n == 0) {
                    r->eof = true;
                    (void)shutdown(to, SHUT_WR);
                } else if (n > 0) {
                    r->len = (size_t)n;
                    if (d == 0 && budget != RELAY_UNLIMITED)
                        budget -= (uint64_t)n;
                }
            }
        }
    }
}


static void handle_http(conn *c, unsigned long long deadline)
{
    med_ctx *ctx = c->ctx;
    a3s_http_req r;
    int rc;
    while ((rc = a3s_http_head_parse((const char *)c->buf, c->len, &r)) == A3S_HP_MORE) {
        if (read_more(c, deadline) <= 0) {
            deny_record(ctx, "http", NULL, 0, "incomplete request");
            refuse(c, NULL, 0);
            return;
        }
    }
    bool says_connect = c->len >= 8 && a3s_ascii_ncase_eq((const char *)c->buf, "CONNECT ", 8);
    const char *proto = (rc == A3S_HP_OK ? r.connect : says_connect) ? "http-connect" : "http";
    switch (rc) {
    case A3S_HP_TOOBIG:
        deny_record(ctx, proto, NULL, 0, "request too large");
        refuse(c, resp_400, sizeof resp_400 - 1);
        return;
    case A3S_HP_CHUNKED:
        deny_record(ctx, proto, r.host, r.port, "chunked body refused");
        refuse(c, resp_400, sizeof resp_400 - 1);
        return;
    case A3S_HP_TLS:
        deny_record(ctx, proto, NULL, 0, "tls interception refused");
        refuse(c, resp_403, sizeof resp_403 - 1);
        return;
    case A3S_HP_OK:
        break;
    default:
        deny_record(ctx, proto, NULL, 0, "malformed request");
        refuse(c, resp_400, sizeof resp_400 - 1);
        return;
    }
    if (!a3s_grants_allow(ctx->g, ctx->n, r.host, r.port)) {
        deny_record(ctx, proto, r.host, r.port, "not granted");
        refuse(c, resp_403, sizeof resp_403 - 1);
        return;
    }
    switch (upstream_open(c, r.host, r.port)) {
    case UP_OK:
        break;
    case UP_INTERNAL:
        deny_record(ctx, proto, r.host, r.port, "internal address");
        refuse(c, resp_403, sizeof resp_403 - 1);
        return;
    case UP_TIMEOUT:
        refuse(c, resp_504, sizeof resp_504 - 1);
        return;
    default:
        refuse(c, resp_502, sizeof resp_502 - 1);
        return;
    }
    unsigned long long io = a3s_now_ms() + (unsigned long long)ctx->idle_ms;
    const unsigned char *extra = c->buf + r.head_len;
    size_t nextra = c->len - r.head_len;
    if (r.connect) {
        if (send_all(c->fd, resp_200, sizeof resp_200 - 1, io) < 0)
            return;
        /* Bytes the client sent right after the head (a TLS hello) go first. */
        if (nextra && send_all(c->up, extra, nextra, io) < 0)
            return;
        relay(c, RELAY_UNLIMITED);
        return;
    }
    /* Plain HTTP: one request per connection, so that every request the upstream sees
     * is one that was decided. The head, then exactly its body, then only the response
     * comes back; anything else the client sends (a pipelined request) is never read. */
    size_t hl = 0;
    char *head = a3s_http_forward_head((const char *)c->buf, &r, &hl);
    int sent = head ? send_all(c->up, head, hl, io) : -1;
    free(head);
    if (sent < 0) {
        refuse(c, resp_502, sizeof resp_502 - 1);
        return;
    }
    size_t now = nextra < r.content_length ? nextra : (size_t)r.content_length;
    if (now && send_all(c->up, extra, now, io) < 0)
        return;
    relay(c, r.content_length - now);
    refuse(c, NULL, 0); /* half-close, let the client read the answer, then close */
}

static void socks_reply(conn *c, unsigned char code, bool final)
{
    unsigned char rep[10] = {5, code, 0, 1, 0, 0, 0, 0, 0, 0}; /* bound 0.0.0.0:0 */
    if (final)
        refuse(c, rep, sizeof rep);
    else
        (void)send_all(c->fd, rep, sizeof rep, a3s_now_ms() + (unsigned long long)c->ctx->idle_ms);
}

static void handle_socks(conn *c, unsigned long long deadline)
{
    med_ctx *ctx = c->ctx;
    size_t used = 0;
    int rc;
    while ((rc = a3s_socks_greeting(c->buf, c->len, &used)) == A3S_SP_MORE) {
        if (read_more(c, deadline) <= 0) {
            deny_record(ctx, "socks5", NULL, 0, "incomplete request");
            refuse(c, NULL, 0);
            return;
        }
    }
    if (rc != A3S_SP_OK) {
        static const unsigned char no_method[2] = {5, 0xff};
        deny_record(ctx, "socks5", NULL, 0,
                    rc == A3S_SP_NOAUTH ? "no acceptable auth method" : "malformed request");
        refuse(c, no_method, sizeof no_method);
        return;
    }
    static const unsigned char chosen[2] = {5, 0x00};
    if (send_all(c->fd, chosen, sizeof chosen, deadline) < 0)
        return;
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    a3s_socks_req r;
    while ((rc = a3s_socks_request(c->buf, c->len, &r, &used)) == A3S_SP_MORE) {
        if (read_more(c, deadline) <= 0) {
            deny_record(ctx, "socks5", NULL, 0, "incomplete request");
            refuse(c, NULL, 0);
            return;
        }
    }
    if (rc == A3S_SP_ATYP) {
        deny_record(ctx, "socks5", NULL, 0, "unsupported address type");
        socks_reply(c, 0x08, true);
        return;
    }
    if (rc != A3S_SP_OK) {
        deny_record(ctx, "socks5", NULL, 0, "malformed request");
        socks_reply(c, 0x01, true);
        return;
    }
    if (r.cmd != 1) {
        deny_record(ctx, "socks5", r.host, r.port, "unsupported command");
        socks_reply(c, 0x07, true);
        return;
    }
    if (!a3s_grants_allow(ctx->g, ctx->n, r.host, r.port)) {
        deny_record(ctx, "socks5", r.host, r.port, "not granted");
        socks_reply(c, 0x02, true);
        return;
    }
    switch (upstream_open(c, r.host, r.port)) {
    case UP_OK:
        break;
    case UP_INTERNAL:
        deny_record(ctx, "socks5", r.host, r.port, "internal address");
        socks_reply(c, 0x02, true);
        return;
    case UP_REFUSED:
        socks_reply(c, 0x05, true);
        return;
    case UP_NETUNREACH:
        socks_reply(c, 0x03, true);
        return;
    default: /* unresolvable, unreachable, timed out */
        socks_reply(c, 0x04, true);
        return;
    }
    socks_reply(c, 0x00, false);
    if (c->len > used &&
        send_all(c->up, c->buf + used, c->len - used,
                 a3s_now_ms() + (unsigned long long)ctx->idle_ms) < 0)
        return;
    relay(c, RELAY_UNLIMITED);
}

static void *conn_main(void *arg)
{
    conn *c = arg;
    med_ctx *ctx = c->ctx;
    /* The whole request must arrive within one idle period: no slow-drip heads. */
    unsigned long long deadline = a3s_now_ms() + (unsigned long long)ctx->idle_ms;
    if (read_more(c, deadline) > 0) {
        if (c->buf[0] == 0x05)
            handle_socks(c, deadline);
        else
            handle_http(c, deadline);
    }
    if (c->up >= 0)
        close(c->up);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
    ctx_release(ctx, true);
    return NULL;
}

/* Over the cap (or out of resources): answer in the client's protocol if it already
 * spoke, without ever blocking the accept loop. */
static void refuse_busy(med_ctx *ctx, int fd, const char *reason)
{
    unsigned char first = 0;
    bool socks = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) == 1 && first == 0x05;
    static const unsigned char socks_fail[10] = {5, 0x01, 0, 1, 0, 0, 0, 0, 0, 0};
    if (socks)
        (void)send(fd, socks_fail, sizeof socks_fail, MSG_NOSIGNAL | MSG_DONTWAIT);
    else
        (void)send(fd, resp_503, sizeof resp_503 - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)shutdown(fd, SHUT_WR);
    close(fd);
    deny_record(ctx, socks ? "socks5" : "http", NULL, 0, reason);
}

static void admit(med_ctx *ctx, int fd, const pthread_attr_t *attr)
{
    pthread_mutex_lock(&ctx->lock);
    bool full = ctx->active >= ctx->max_conns;
    if (!full)
        ctx->active++;
    pthread_mutex_unlock(&ctx->lock);
    if (full) {
        refuse_busy(ctx, fd, "too many connections");
        return;
    }
    conn *c = malloc(sizeof *c);
    int rc = ENOMEM;
    if (c) {
        c->ctx = ctx;
        c->fd = fd;
        c->up = -1;
        c->len = 0;
        memset(c->dir, 0, sizeof c->dir);
        /* Workers take no signals: those stay with the process's own threads. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        pthread_t t;
        rc = pthread_create(&t, attr, conn_main, c);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (rc != 0) {
        free(c);
        pthread_mutex_lock(&ctx->lock);
        ctx->active--;
        pthread_mutex_unlock(&ctx->lock);
        refuse_busy(ctx, fd, "out of resources");
    }
}

/* One connection handed over by the relay: the fd of a TCP stream socket (anything else
 * is closed: -2), or -1 with errno. */
static int channel_take(int chan)
{
    char kind;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &kind, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof u.buf};
    ssize_t got = recvmsg(chan, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (got < 0)
        return -1;
    int fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
            c->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (got == 0 && fd < 0) {
        errno = EPIPE; /* the relay closed its end */
        return -1;
    }
    int domain = 0, type = 0;
    socklen_t dl = sizeof domain, tl = sizeof type;
    if (fd < 0 || (m.msg_flags & MSG_CTRUNC) ||
        getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 ||
        getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
        (domain != AF_INET && domain != AF_INET6) || type != SOCK_STREAM) {
        if (fd >= 0)
            close(fd);
        return -2;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)) {
        close(fd);
        return -2;
    }
    return fd;
}

int a3s_mediator_serve(int listen_fd, int stop_fd, const a3s_grant *g, size_t n,
                       int denial_fd, const a3s_mediator_opts *opts)
{
    if (listen_fd < 0 || stop_fd < 0 || (n && !g) || fcntl(stop_fd, F_GETFD) < 0) {
        errno = EINVAL;
        return -1;
    }
    int lflags = fcntl(listen_fd, F_GETFL);
    if (lflags < 0)
        return -1;
    med_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return -1;
    ctx->denial_fd = -1;
    ctx->connect_ms = opts && opts->connect_timeout_ms > 0 ? opts->connect_timeout_ms : 10000;
    ctx->idle_ms = opts && opts->idle_timeout_ms > 0 ? opts->idle_timeout_ms : 60000;
    ctx->max_conns = opts && opts->max_connections > 0 ? opts->max_connections : 128;
    int keep = opts && opts->denial_records > 0 ? opts->denial_records : A3S_DENY_KEEP_DEFAULT;
    ctx->deny.keep = (size_t)(keep < A3S_DENY_KEEP_MAX ? keep : A3S_DENY_KEEP_MAX);
    bool ready = (!n || (ctx->g = malloc(n * sizeof *g)) != NULL) &&
                 (ctx->deny.ring = calloc(ctx->deny.keep, sizeof *ctx->deny.ring)) != NULL &&
                 (denial_fd < 0 || (ctx->denial_fd = fcntl(denial_fd, F_DUPFD_CLOEXEC, 3)) >= 0);
    /* The host's own addresses, read now: a mediator that cannot tell them does not serve. */
    if (ready)
        ready = ctx->own_ready = a3s_host_addrs_init(&ctx->own) == 0;
    if (ready)
        ready = pthread_mutex_init(&ctx->lock, NULL) == 0;
    if (!ready) {
        int e = errno;
        if (ctx->denial_fd >= 0)
            close(ctx->denial_fd);
        if (ctx->own_ready)
            a3s_host_addrs_free(&ctx->own);
        free(ctx->deny.ring);
        free(ctx->g);
        free(ctx);
        errno = e;
        return -1;
    }
    if (n)
        memcpy(ctx->g, g, n * sizeof *g);
    ctx->n = n;
    ctx->serving = true;

    pthread_attr_t attr;
    sigset_t pipe_set, old_mask;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int rc = -1;
    if (pthread_attr_init(&attr) != 0) {
        ctx_release(ctx, false);
        return -1;
    }
    /* Non-blocking accept: a client gone between poll and accept must not block the loop
     * past a stop. */
    if (pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) != 0 ||
        pthread_attr_setstacksize(&attr, THREAD_STACK) != 0 ||
        (!(lflags & O_NONBLOCK) && fcntl(listen_fd, F_SETFL, lflags | O_NONBLOCK) < 0)) {
        pthread_attr_destroy(&attr);
        ctx_release(ctx, false);
        return -1;
    }
    /* Denial writes to a closed pipe must fail with EPIPE, not kill the process. */
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
    /* Set up: say so when asked (a parent that cannot hear it has given up on us). */
    bool go = !(opts && opts->notify_ready) || a3s_write_all(opts->ready_fd, "R", 1) == 0;
    while (go) {
        struct pollfd p[2] = {{stop_fd, POLLIN, 0}, {listen_fd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[0].revents) { /* readable, hung up or gone: stop */
            rc = 0;
            break;
        }
        if (p[1].revents & (POLLERR | POLLNVAL))
            break;
        bool chan = opts && opts->channel;
        if (chan && (p[1].revents & POLLHUP) && !(p[1].revents & POLLIN)) {
            /* The relay is gone (its end closed): nothing more will come; the
             * connections already handed over are served until the stop. */
            (void)poll(p, 1, -1);
            rc = 0;
            break;
        }
        if (!(p[1].revents & POLLIN))
            continue;
        int fd = chan ? channel_take(listen_fd)
                      : accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd == -2)
            continue; /* a message without a usable connection: dropped */
        if (fd < 0 && chan && errno == EPIPE) {
            (void)poll(p, 1, -1);
            rc = 0;
            break;
        }
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == EAGAIN || e == EWOULDBLOCK || e == ECONNABORTED || e == EPROTO)
                continue;
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                (void)poll(p, 1, 100); /* back off, still watching for the stop */
                continue;
            }
            break;
        }
        admit(ctx, fd, &attr);
    }
    int e = errno;
    if (!(lflags & O_NONBLOCK))
        (void)fcntl(listen_fd, F_SETFL, lflags);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) > 0)
        ; /* consume our own SIGPIPEs before unblocking */
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    pthread_attr_destroy(&attr);
    ctx_release(ctx, false);
    errno = e;
    return rc;
}
