/* The host-side network mediator for grants (SPEC §6).
 *
 * Every read is bounded while it happens (the head buffer never grows), every wait has a
 * deadline, the decision is made on the parsed origin before any upstream byte, names are
 * resolved here and refused when they land on internal addresses or on one of the host's
 * own (unless the grant is that IP literal; the unspecified address never), and the first
 * acceptable address that answers is pinned for the connection. Plain HTTP is one request
 * per connection, so that the upstream never sees a request that was not decided, and the
 * refusal records stay bounded however many refusals there are. */
#include "mediator.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <jansson.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
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

#include "json.h"
#include "util.h"

#define REQ_LINE_MAX 8192  /* request line, CRLF included */
#define HEADERS_MAX 16384  /* header lines and the final CRLF */
#define HEAD_BUF (REQ_LINE_MAX + HEADERS_MAX)
#define RELAY_BUF 16384
#define LINGER_MS 250      /* how long a refused client gets to read its answer */
#define LINGER_BYTES 65536
#define THREAD_STACK (512 * 1024) /* getaddrinfo and NSS need some room, not 8 MiB */

/* ------------------------------------------------------------------ characters */

static bool is_alpha(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static unsigned char to_lower(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') ? (unsigned char)(c + 32) : c;
}

/* RFC 9110 token characters (header names). */
static bool is_tchar(unsigned char c)
{
    return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int hex_val(unsigned char c)
{
    if (is_digit(c))
        return c - '0';
    c = to_lower(c);
    return (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
}

/* ------------------------------------------------------------------ address policy */

static bool v4_internal(const unsigned char b[4])
{
    if (b[0] == 0 || b[0] == 10 || b[0] == 127)     /* this network, RFC 1918, loopback */
        return true;
    if (b[0] == 100 && (b[1] & 0xc0) == 64)           /* CGNAT 100.64/10 */
        return true;
    if (b[0] == 169 && b[1] == 254)                   /* link-local and cloud metadata */
        return true;
    if (b[0] == 172 && (b[1] & 0xf0) == 16)           /* RFC 1918 */
        return true;
    if (b[0] == 192 && b[1] == 168)                   /* RFC 1918 */
        return true;
    return b[0] >= 224;                               /* multicast, reserved, broadcast */
}

bool a3s_addr_is_internal(const struct sockaddr *sa)
{
    if (!sa)
        return true;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        unsigned char b[4];
        memcpy(b, &in->sin_addr, 4);
        return v4_internal(b);
    }
    if (sa->sa_family != AF_INET6)
        return true; /* nothing else is an upstream we understand: fail closed */
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
    const unsigned char *b = in6->sin6_addr.s6_addr;
    static const unsigned char zero[12];
    if (memcmp(b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
        return v4_internal(b + 12);                   /* IPv4-mapped */
    if (memcmp(b, zero, 12) == 0)                     /* ::, ::1, IPv4-compatible */
        return (b[12] | b[13] | b[14]) == 0 ? true : v4_internal(b + 12);
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
        if (memcmp(b + 4, zero, 8) == 0)
            return v4_internal(b + 12);               /* NAT64 64:ff9b::/96 */
        return true;                                  /* local-use NAT64 64:ff9b:1::/48 */
    }
    if (b[0] == 0x20 && b[1] == 0x02)
        return v4_internal(b + 2);                    /* 6to4 embeds an IPv4 address */
    if ((b[0] & 0xfe) == 0xfc)                        /* unique local fc00::/7 (fd00:ec2::254) */
        return true;
    if (b[0] == 0xfe && (b[1] & 0x80) == 0x80)        /* link-local fe80::/10, site-local */
        return true;
    return b[0] == 0xff;                              /* multicast */
}

static const unsigned char v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* ------------------------------------------------------------------ HTTP parsing */

enum {
    HP_MORE = 0,
    HP_OK = 1,
    HP_BAD = -1,
    HP_TOOBIG = -2,
    HP_TLS = -3,
    HP_CHUNKED = -4,
};

static const char *const http_methods[] = {"CONNECT", "GET",    "HEAD",   "POST",
                                           "PUT",     "PATCH",  "DELETE", "OPTIONS"};

static const char *method_find(const char *m, size_t n)
{
    for (size_t i = 0; i < sizeof http_methods / sizeof *http_methods; i++)
        if (strlen(http_methods[i]) == n && a3s_ascii_ncase_eq(m, http_methods[i], n))
            return http_methods[i];
    return NULL;
}

/* An origin-form path (query included) is acceptable when it starts with '/', has no
 * dot segments, no '\\' or '#', only well-formed escapes, and no escaped '.', '/', '\\'
 * in the path part or NUL anywhere: what the grant saw is what the upstream serves. */
static bool path_ok(const char *p, size_t n)
{
    if (n == 0 || p[0] != '/')
        return false;
    const char *qm = memchr(p, '?', n);
    size_t q = qm ? (size_t)(qm - p) : n;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '\\' || c == '#')
            return false;
        if (c != '%')
            continue;
        if (i + 2 >= n)
            return false;
        int hi = hex_val((unsigned char)p[i + 1]), lo = hex_val((unsigned char)p[i + 2]);
        if (hi < 0 || lo < 0)
            return false;
        int v = hi * 16 + lo;
        if (v == 0 || (i < q && (v == '.' || v == '/' || v == '\\')))
            return false;
        i += 2;
    }
    for (size_t s = 0; s < q;) {
        size_t e = s + 1;
        while (e < q && p[e] != '/')
            e++;
        size_t seg = e - s - 1; /* bytes after the '/' */
        if ((seg == 1 && p[s + 1] == '.') || (seg == 2 && p[s + 1] == '.' && p[s + 2] == '.'))
            return false;
        s = e;
    }
    return true;
}

static bool method_prefix(const char *m, size_t n)
{
    for (size_t i = 0; i < sizeof http_methods / sizeof *http_methods; i++)
        if (strlen(http_methods[i]) >= n && a3s_ascii_ncase_eq(m, http_methods[i], n))
            return true;
    return false;
}

/* Check the request line bytes seen so far (no LF yet), so garbage is refused at once
 * instead of after a timeout. */
static int line_prefix(const char *b, size_t m)
{
    size_t i = 0;
    while (i < m && b[i] != ' ')
        i++;
    if (i < m ? !method_find(b, i) : !method_prefix(b, i))
        return HP_BAD;
    for (size_t j = 0; j < m; j++) {
        unsigned char c = (unsigned char)b[j];
        if (c == '\r' && j + 1 == m)
            continue; /* the LF may still come */
        if (c < 0x20 || c >= 0x7f)
            return HP_BAD;
    }
    return HP_MORE;
}

static int request_line(const char *line, size_t ll, a3s_http_req *r)
{
    const char *sp1 = memchr(line, ' ', ll);
    if (!sp1)
        return HP_BAD;
    const char *m = method_find(line, (size_t)(sp1 - line));
    if (!m)
        return HP_BAD;
    snprintf(r->method, sizeof r->method, "%s", m);
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', ll - (size_t)(t - line));
    if (!sp2 || sp2 == t)
        return HP_BAD;
    size_t tlen = (size_t)(sp2 - t);
    const char *v = sp2 + 1;
    size_t vlen = ll - (size_t)(v - line);
    if (vlen != 8 || (memcmp(v, "HTTP/1.1", 8) != 0 && memcmp(v, "HTTP/1.0", 8) != 0))
        return HP_BAD; /* also refuses extra tokens: they would contain a space */
    if (strcmp(m, "CONNECT") == 0) {
        if (a3s_grant_authority_parse(t, tlen, r->host, &r->port) || r->port == 0)
            return HP_BAD;
        r->connect = true;
        return HP_OK;
    }
    if (tlen >= 8 && a3s_ascii_ncase_eq(t, "https://", 8))
        return HP_TLS; /* no TLS interception: HTTPS goes through CONNECT */
    if (tlen < 7 || !a3s_ascii_ncase_eq(t, "http://", 7))
        return HP_BAD;
    const char *a = t + 7;
    const char *slash = memchr(a, '/', tlen - 7);
    if (!slash)
        return HP_BAD;
    if (a3s_grant_authority_parse(a, (size_t)(slash - a), r->host, &r->port))
        return HP_BAD;
    if (r->port == 0)
        r->port = 80;
    size_t plen = (size_t)(t + tlen - slash);
    if (plen >= sizeof r->path || !path_ok(slash, plen))
        return HP_BAD;
    memcpy(r->path, slash, plen);
    r->path[plen] = '\0';
    return HP_OK;
}

static int header_line(const char *h, size_t hl, bool *have_cl, uint64_t *cl)
{
    const char *colon = memchr(h, ':', hl);
    if (!colon || colon == h)
        return HP_BAD; /* also refuses obs-fold continuation lines */
    size_t nl = (size_t)(colon - h);
    for (size_t i = 0; i < nl; i++)
        if (!is_tchar((unsigned char)h[i]))
            return HP_BAD; /* "Name :" is a smuggling classic */
    for (size_t i = nl + 1; i < hl; i++) {
        unsigned char c = (unsigned char)h[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return HP_BAD;
    }
    if (nl == 17 && a3s_ascii_ncase_eq(h, "transfer-encoding", 17))
        return HP_CHUNKED;
    if (nl == 14 && a3s_ascii_ncase_eq(h, "content-length", 14)) {
        const char *v = colon + 1, *e = h + hl;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (*have_cl || e == v || e - v > 18)
            return HP_BAD;
        uint64_t val = 0; /* at most 18 digits: no overflow */
        for (const char *p = v; p < e; p++) {
            if (!is_digit((unsigned char)*p))
                return HP_BAD;
            val = val * 10 + (uint64_t)(*p - '0');
        }
        *have_cl = true;
        *cl = val;
    }
    return HP_OK;
}

static int http_parse(const char *buf, size_t len, a3s_http_req *r)
{
    memset(r, 0, sizeof *r);
    size_t scan = len < REQ_LINE_MAX ? len : REQ_LINE_MAX;
    const char *lf = scan ? memchr(buf, '\n', scan) : NULL;
    if (!lf) {
        if (line_prefix(buf, scan) == HP_BAD)
            return HP_BAD;
        return len >= REQ_LINE_MAX ? HP_TOOBIG : HP_MORE;
    }
    size_t le = (size_t)(lf - buf); /* index of the LF */
    if (le == 0 || buf[le - 1] != '\r' || line_prefix(buf, le) == HP_BAD)
        return HP_BAD;
    int rc = request_line(buf, le - 1, r);
    if (rc != HP_OK)
        return rc;
    size_t start = le + 1, pos = start;
    bool have_cl = false;
    for (;;) {
        size_t room = start + HEADERS_MAX - pos;
        size_t avail = len - pos;
        const char *nl = memchr(buf + pos, '\n', avail < room ? avail : room);
        if (!nl)
            return avail >= room ? HP_TOOBIG : HP_MORE;
        size_t e = (size_t)(nl - buf);
        if (e == pos || buf[e - 1] != '\r')
            return HP_BAD; /* bare LF */
        size_t hl = e - 1 - pos;
        if (hl == 0) {
            r->head_len = e + 1;
            return HP_OK;
        }
        rc = header_line(buf + pos, hl, &have_cl, &r->content_length);
        if (rc != HP_OK)
            return rc;
        pos = e + 1;
    }
}

int a3s_http_parse(const char *buf, size_t len, a3s_http_req *r)
{
    if (!r || (!buf && len))
        return -1;
    int rc = http_parse(buf ? buf : "", len, r);
    return rc > 0 ? 1 : rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ SOCKS5 parsing */

enum {
    SP_MORE = 0,
    SP_OK = 1,
    SP_BAD = -1,
    SP_NOAUTH = -2,
    SP_ATYP = -3,
};

static int socks_greeting(const unsigned char *b, size_t len, size_t *used)
{
    if (len < 1)
        return SP_MORE;
    if (b[0] != 5)
        return SP_BAD;
    if (len < 2)
        return SP_MORE;
    size_t n = b[1];
    if (n == 0)
        return SP_NOAUTH;
    if (len < 2 + n)
        return SP_MORE;
    if (!memchr(b + 2, 0x00, n))
        return SP_NOAUTH;
    *used = 2 + n;
    return SP_OK;
}

static int socks_request(const unsigned char *b, size_t len, a3s_socks_req *r, size_t *used)
{
    memset(r, 0, sizeof *r);
    if (len < 4)
        return (len >= 1 && b[0] != 5) || (len >= 3 && b[2] != 0) ? SP_BAD : SP_MORE;
    if (b[0] != 5 || b[2] != 0)
        return SP_BAD;
    size_t off = 4, alen;
    switch (b[3]) {
    case 1:
        alen = 4;
        break;
    case 4:
        alen = 16;
        break;
    case 3:
        if (len < 5)
            return SP_MORE;
        alen = b[4];
        off = 5;
        if (alen == 0)
            return SP_BAD;
        break;
    default:
        return SP_ATYP;
    }
    if (len < off + alen + 2)
        return SP_MORE;
    if (b[3] == 1 || b[3] == 4) {
        if (!inet_ntop(b[3] == 1 ? AF_INET : AF_INET6, b + off, r->host, sizeof r->host))
            return SP_BAD;
    } else if (a3s_grant_host_check((const char *)b + off, alen, r->host)) {
        return SP_BAD;
    }
    r->port = (b[off + alen] << 8) | b[off + alen + 1];
    if (r->port == 0)
        return SP_BAD;
    r->cmd = b[1];
    *used = off + alen + 2;
    return SP_OK;
}

int a3s_socks_parse(const unsigned char *buf, size_t len, a3s_socks_req *r, size_t *used)
{
    if (!r || !used || (!buf && len))
        return -1;
    static const unsigned char none[1];
    if (!buf)
        buf = none;
    size_t g = 0, q = 0;
    int rc = socks_greeting(buf, len, &g);
    if (rc == SP_OK)
        rc = socks_request(buf + g, len - g, r, &q);
    if (rc == SP_OK)
        *used = g + q;
    return rc > 0 ? 1 : rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ serving */

/* Refusals are counted exactly, but only the first `keep` and the last `keep` are kept
 * as records: a client looping on refused requests must neither grow the record file
 * without bound nor push the interesting records out of it. */
#define DENY_LINE_MAX 512 /* a record: the target is at most 253 + 9 bytes */
#define DENY_KEEP_DEFAULT 32
#define DENY_KEEP_MAX 1024
#define DENY_REASONS 32 /* distinct reasons counted by name (the code has about 15) */

typedef struct deny_line {
    unsigned long long seq; /* which refusal this slot holds */
    size_t len;             /* 0: empty (or it could not be formatted) */
    char text[DENY_LINE_MAX];
} deny_line;

typedef struct deny_log {
    size_t keep;
    unsigned long long total, kept_first;
    deny_line *ring;                  /* keep slots, refusal number seq in slot seq % keep */
    const char *reason[DENY_REASONS]; /* static strings, counted in count[] */
    unsigned long long count[DENY_REASONS];
    unsigned long long other; /* reasons beyond DENY_REASONS distinct ones */
    bool closed;              /* the summary is out: later refusals are not recorded */
} deny_log;

/* Every address on one of the host's interfaces, as IPv6 (IPv4 ones mapped). Re-read
 * when the kernel reports an address change on `nl`, and at most a second after the
 * last reading in any case. */
typedef struct host_addrs {
    pthread_mutex_t lock;
    int nl;                     /* NETLINK_ROUTE, address-change groups; -1 if none */
    bool stale;                 /* re-read before the next answer */
    unsigned long long read_ms; /* when the list was read */
    size_t n;
    struct in6_addr *a;
} host_addrs;

typedef struct med_ctx {
    pthread_mutex_t lock; /* guards active, serving and the denial log */
    int active;           /* connection threads alive */
    bool serving;         /* a3s_mediator_serve has not returned yet */
    int denial_fd;        /* our own duplicate (or -1): threads may outlive the caller's fd */
    int connect_ms, idle_ms, max_conns;
    size_t n;
    a3s_grant *g;
    deny_log deny;
    host_addrs own; /* its lock is taken alone, never with `lock` */
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
    unsigned char buf[HEAD_BUF];
    relay_dir dir[2]; /* 0: client -> upstream, 1: upstream -> client */
} conn;

/* ------------------------------------------------------------------ denial records */

/* One record line (newline included) into out; its length, or 0 when it does not fit. */
static size_t deny_format(char *out, size_t cap, const char *proto, const char *host, int port,
                          const char *reason)
{
    char target[A3S_GRANT_HOST_MAX + 16] = "";
    if (host && *host)
        snprintf(target, sizeof target, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    /* The host passed host_check (ASCII), but a target is still written the one way
     * every host-derived text is (engine/json.h), and a failed member fails the record
     * (it is still counted) instead of writing it without its target. */
    json_t *o = json_object();
    bool ok = a3s_json_set(o, "kind", json_string("network")) == 0 &&
              a3s_json_set(o, "protocol", a3s_json_cstr(proto)) == 0 &&
              a3s_json_set(o, "target", a3s_json_cstr(target)) == 0 &&
              a3s_json_set(o, "reason", a3s_json_cstr(reason)) == 0 &&
              a3s_json_set(o, "decision", json_string("deny")) == 0;
    size_t n = ok ? json_dumpb(o, out, cap, JSON_COMPACT) : 0;
    json_decref(o);
    if (n == 0 || n >= cap)
        return 0;
    out[n] = '\n';
    return n + 1;
}

/* The first `keep` refusals are written as they happen; every one is counted. Called
 * with ctx->lock held. */
static void deny_log_add(med_ctx *ctx, const char *line, size_t len, const char *reason)
{
    deny_log *d = &ctx->deny;
    if (d->closed)
        return;
    unsigned long long seq = d->total++;
    size_t i = 0;
    while (i < DENY_REASONS && d->reason[i] && strcmp(d->reason[i], reason) != 0)
        i++;
    if (i == DENY_REASONS) {
        d->other++;
    } else {
        d->reason[i] = reason;
        d->count[i]++;
    }
    if (seq < d->keep) {
        if (len && a3s_write_all(ctx->denial_fd, line, len) == 0)
            d->kept_first++;
        return;
    }
    deny_line *slot = &d->ring[seq % d->keep];
    slot->seq = seq;
    slot->len = len;
    if (len)
        memcpy(slot->text, line, len);
}

/* At stop: the last records not written yet, then the summary line (see mediator.h).
 * Called with ctx->lock held; later refusals are not recorded. */
static void deny_log_close(med_ctx *ctx)
{
    deny_log *d = &ctx->deny;
    if (d->closed || ctx->denial_fd < 0)
        return;
    d->closed = true;
    if (d->total == 0)
        return;
    unsigned long long from = d->total > 2 * d->keep ? d->total - d->keep : d->keep;
    unsigned long long kept_last = 0;
    for (unsigned long long seq = from; seq < d->total; seq++) {
        const deny_line *slot = &d->ring[seq % d->keep];
        if (slot->seq == seq && slot->len &&
            a3s_write_all(ctx->denial_fd, slot->text, slot->len) == 0)
            kept_last++;
    }
    json_t *counts = json_object();
    bool ok = counts != NULL;
    for (size_t i = 0; ok && i < DENY_REASONS && d->reason[i]; i++)
        ok = a3s_json_set(counts, d->reason[i], json_integer((json_int_t)d->count[i])) == 0;
    if (ok && d->other)
        ok = a3s_json_set(counts, "other", json_integer((json_int_t)d->other)) == 0;
    if (!ok) { /* a summary without all its counts would lie: none at all */
        json_decref(counts);
        counts = NULL;
    }
    json_t *o =
        counts ? json_pack("{s:s, s:b, s:s, s:I, s:I, s:I, s:I, s:o}", "kind", "network", "summary",
                           1, "decision", "deny", "total", (json_int_t)d->total, "kept_first",
                           (json_int_t)d->kept_first, "kept_last", (json_int_t)kept_last, "dropped",
                           (json_int_t)(d->total - d->kept_first - kept_last), "counts", counts)
               : NULL;
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) {
        size_t n = strlen(text);
        text[n] = '\n'; /* replaces the NUL: written by length */
        (void)a3s_write_all(ctx->denial_fd, text, n + 1);
        free(text);
    }
}

static void host_addrs_free(host_addrs *h);

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
        deny_log_close(ctx);
    bool last = !ctx->serving && ctx->active == 0;
    pthread_mutex_unlock(&ctx->lock);
    if (!last)
        return;
    if (ctx->denial_fd >= 0)
        close(ctx->denial_fd);
    if (ctx->own_ready)
        host_addrs_free(&ctx->own);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->deny.ring);
    free(ctx->g);
    free(ctx);
}

/* One record per refusal, bounded as above; only the parsed origin, never header values
 * or bodies. reason must be a static string (it is counted by name). */
static void deny_record(med_ctx *ctx, const char *proto, const char *host, int port,
                        const char *reason)
{
    if (ctx->denial_fd < 0)
        return;
    char line[DENY_LINE_MAX];
    size_t len = deny_format(line, sizeof line, proto, host, port, reason);
    pthread_mutex_lock(&ctx->lock);
    deny_log_add(ctx, line, len, reason);
    pthread_mutex_unlock(&ctx->lock);
}

/* ------------------------------------------------------------------ host addresses */

#define OWN_REFRESH_MS 1000

/* addr as IPv6: IPv4 mapped; IPv4-mapped and IPv4-compatible IPv6 stay as the IPv4 they
 * carry (the kernel connects ::ffff:a.b.c.d as a.b.c.d). false for other families. */
static bool as_v6(const struct sockaddr *sa, struct in6_addr *out)
{
    if (sa->sa_family == AF_INET) {
        memcpy(out->s6_addr, v4_mapped_prefix, 12);
        memcpy(out->s6_addr + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family != AF_INET6)
        return false;
    memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, sizeof *out);
    static const unsigned char zero[12];
    if (memcmp(out->s6_addr, zero, 12) == 0 && (out->s6_addr[12] | out->s6_addr[13]) != 0)
        memcpy(out->s6_addr, v4_mapped_prefix, 12); /* ::a.b.c.d (not ::, ::1) */
    return true;
}

static int host_addrs_read(host_addrs *h)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) < 0)
        return -1;
    size_t n = 0;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next)
        n++;
    struct in6_addr *a = calloc(n ? n : 1, sizeof *a);
    if (!a) {
        freeifaddrs(all);
        errno = ENOMEM;
        return -1;
    }
    size_t k = 0;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next)
        if (i->ifa_addr && as_v6(i->ifa_addr, &a[k]))
            k++;
    freeifaddrs(all);
    free(h->a);
    h->a = a;
    h->n = k;
    h->read_ms = a3s_now_ms();
    h->stale = false;
    return 0;
}

/* Listen for address changes, then read the list (in that order: a change between the
 * two is either in the list or announced). Without netlink, the timer alone re-reads. */
static int host_addrs_init(host_addrs *h)
{
    memset(h, 0, sizeof *h);
    if (pthread_mutex_init(&h->lock, NULL) != 0)
        return -1;
    h->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
                             .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
    if (h->nl >= 0 && bind(h->nl, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(h->nl);
        h->nl = -1;
    }
    if (host_addrs_read(h) < 0) {
        int e = errno;
        if (h->nl >= 0)
            close(h->nl);
        pthread_mutex_destroy(&h->lock);
        errno = e;
        return -1;
    }
    return 0;
}

static void host_addrs_free(host_addrs *h)
{
    if (h->nl >= 0)
        close(h->nl);
    pthread_mutex_destroy(&h->lock);
    free(h->a);
    h->a = NULL;
}

/* 1 when addr is one of the host's own, 0 when not, -1 when the list could not be
 * brought up to date (the caller refuses: fail closed). */
static int host_addrs_has(host_addrs *h, const struct sockaddr *addr)
{
    struct in6_addr want;
    if (!as_v6(addr, &want))
        return -1;
    pthread_mutex_lock(&h->lock);
    /* Any message (or an overflow: ENOBUFS) means something changed: re-read. */
    for (char buf[4096]; h->nl >= 0;) {
        ssize_t r = recv(h->nl, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0 || (r < 0 && errno == ENOBUFS)) {
            h->stale = true;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            h->stale = true; /* a broken socket: trust only fresh readings */
        break;
    }
    int rc = 0;
    if ((h->stale || a3s_now_ms() - h->read_ms >= OWN_REFRESH_MS) && host_addrs_read(h) < 0) {
        h->stale = true;
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < h->n; i++)
        if (memcmp(&h->a[i], &want, sizeof want) == 0)
            rc = 1;
    pthread_mutex_unlock(&h->lock);
    return rc;
}

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

/* Whether a resolved address may be an upstream: never an unspecified one; for a name,
 * no internal range and none of the host's own addresses (an IP literal is allowed as
 * is: the decision already matched a grant naming exactly that literal). */
static bool upstream_acceptable(med_ctx *ctx, const struct sockaddr *sa, bool literal)
{
    if (a3s_addr_is_unspecified(sa))
        return false;
    if (literal)
        return true;
    return !a3s_addr_is_internal(sa) && host_addrs_has(&ctx->own, sa) == 0;
}

/* Resolve on the host, drop the addresses upstream_acceptable refuses, and connect to the
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
        if (!upstream_acceptable(c->ctx, ai->ai_addr, literal)) {
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

static bool hop_by_hop(const char *name, size_t n, const char *const *extra,
                       const size_t *extra_n, size_t nextra)
{
    static const char *const fixed[] = {"connection", "keep-alive", "te",
                                        "trailer",    "upgrade",    "host"};
    /* The body's framing is forwarded as is, whatever a Connection header names: the
     * upstream must count the same body we do, else the body turns into requests.
     * (Transfer-Encoding never gets here: such requests are refused.) */
    if ((n == 14 && a3s_ascii_ncase_eq(name, "content-length", 14)) ||
        (n == 17 && a3s_ascii_ncase_eq(name, "transfer-encoding", 17)))
        return false;
    if (n >= 6 && a3s_ascii_ncase_eq(name, "proxy-", 6))
        return true;
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
        if (strlen(fixed[i]) == n && a3s_ascii_ncase_eq(name, fixed[i], n))
            return true;
    for (size_t i = 0; i < nextra; i++)
        if (extra_n[i] == n && a3s_ascii_ncase_eq(name, extra[i], n))
            return true;
    return false;
}

/* The upstream head in origin form: our own Host, the client's end-to-end headers (minus
 * hop-by-hop ones and those its Connection header names), and "Connection: close". */
static char *forward_head(const char *buf, const a3s_http_req *r, size_t *out_len)
{
    const char *end = buf + r->head_len - 2; /* before the final CRLF */
    const char *first = (const char *)memchr(buf, '\n', r->head_len) + 1;
    enum { MAX_NAMED = 32 };
    const char *named[MAX_NAMED];
    size_t named_n[MAX_NAMED], nnamed = 0;
    for (const char *h = first; h < end;) {
        const char *e = memchr(h, '\r', (size_t)(end - h));
        const char *colon = memchr(h, ':', (size_t)(e - h));
        if ((size_t)(colon - h) == 10 && a3s_ascii_ncase_eq(h, "connection", 10)) {
            for (const char *t = colon + 1; t < e;) {
                while (t < e && (*t == ' ' || *t == '\t' || *t == ','))
                    t++;
                const char *s = t;
                while (t < e && *t != ',' && *t != ' ' && *t != '\t')
                    t++;
                if (t > s && nnamed < MAX_NAMED) {
                    named[nnamed] = s;
                    named_n[nnamed++] = (size_t)(t - s);
                }
            }
        }
        h = e + 2;
    }
    size_t cap = r->head_len + strlen(r->path) + A3S_GRANT_HOST_MAX + 128;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    bool v6 = strchr(r->host, ':') != NULL;
    int n = snprintf(out, cap, "%s %s HTTP/1.1\r\nHost: %s%s%s", r->method, r->path,
                     v6 ? "[" : "", r->host, v6 ? "]" : "");
    size_t len = (size_t)n;
    if (r->port != 80)
        len += (size_t)snprintf(out + len, cap - len, ":%d", r->port);
    memcpy(out + len, "\r\n", 2);
    len += 2;
    for (const char *h = first; h < end;) {
        const char *e = memchr(h, '\r', (size_t)(end - h));
        const char *colon = memchr(h, ':', (size_t)(e - h));
        if (!hop_by_hop(h, (size_t)(colon - h), named, named_n, nnamed)) {
            memcpy(out + len, h, (size_t)(e - h) + 2);
            len += (size_t)(e - h) + 2;
        }
        h = e + 2;
    }
    memcpy(out + len, "Connection: close\r\n\r\n", 21);
    len += 21;
    out[len] = '\0'; /* cap has room to spare: the request line adds < 64 bytes */
    *out_len = len;
    return out;
}

char *a3s_http_forward_head(const char *buf, const a3s_http_req *r, size_t *len)
{
    if (!buf || !r || !len || r->connect || r->head_len < 4 || !memchr(buf, '\n', r->head_len))
        return NULL;
    return forward_head(buf, r, len);
}

static void handle_http(conn *c, unsigned long long deadline)
{
    med_ctx *ctx = c->ctx;
    a3s_http_req r;
    int rc;
    while ((rc = http_parse((const char *)c->buf, c->len, &r)) == HP_MORE) {
        if (read_more(c, deadline) <= 0) {
            deny_record(ctx, "http", NULL, 0, "incomplete request");
            refuse(c, NULL, 0);
            return;
        }
    }
    bool says_connect = c->len >= 8 && a3s_ascii_ncase_eq((const char *)c->buf, "CONNECT ", 8);
    const char *proto = (rc == HP_OK ? r.connect : says_connect) ? "http-connect" : "http";
    switch (rc) {
    case HP_TOOBIG:
        deny_record(ctx, proto, NULL, 0, "request too large");
        refuse(c, resp_400, sizeof resp_400 - 1);
        return;
    case HP_CHUNKED:
        deny_record(ctx, proto, r.host, r.port, "chunked body refused");
        refuse(c, resp_400, sizeof resp_400 - 1);
        return;
    case HP_TLS:
        deny_record(ctx, proto, NULL, 0, "tls interception refused");
        refuse(c, resp_403, sizeof resp_403 - 1);
        return;
    case HP_OK:
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
    char *head = forward_head((const char *)c->buf, &r, &hl);
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
    while ((rc = socks_greeting(c->buf, c->len, &used)) == SP_MORE) {
        if (read_more(c, deadline) <= 0) {
            deny_record(ctx, "socks5", NULL, 0, "incomplete request");
            refuse(c, NULL, 0);
            return;
        }
    }
    if (rc != SP_OK) {
        static const unsigned char no_method[2] = {5, 0xff};
        deny_record(ctx, "socks5", NULL, 0,
                    rc == SP_NOAUTH ? "no acceptable auth method" : "malformed request");
        refuse(c, no_method, sizeof no_method);
        return;
    }
    static const unsigned char chosen[2] = {5, 0x00};
    if (send_all(c->fd, chosen, sizeof chosen, deadline) < 0)
        return;
    memmove(c->buf, c->buf + used, c->len - used);
    c->len -= used;
    a3s_socks_req r;
    while ((rc = socks_request(c->buf, c->len, &r, &used)) == SP_MORE) {
        if (read_more(c, deadline) <= 0) {
            deny_record(ctx, "socks5", NULL, 0, "incomplete request");
            refuse(c, NULL, 0);
            return;
        }
    }
    if (rc == SP_ATYP) {
        deny_record(ctx, "socks5", NULL, 0, "unsupported address type");
        socks_reply(c, 0x08, true);
        return;
    }
    if (rc != SP_OK) {
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
    int keep = opts && opts->denial_records > 0 ? opts->denial_records : DENY_KEEP_DEFAULT;
    ctx->deny.keep = (size_t)(keep < DENY_KEEP_MAX ? keep : DENY_KEEP_MAX);
    bool ready = (!n || (ctx->g = malloc(n * sizeof *g)) != NULL) &&
                 (ctx->deny.ring = calloc(ctx->deny.keep, sizeof *ctx->deny.ring)) != NULL &&
                 (denial_fd < 0 || (ctx->denial_fd = fcntl(denial_fd, F_DUPFD_CLOEXEC, 3)) >= 0);
    /* The host's own addresses, read now: a mediator that cannot tell them does not serve. */
    if (ready)
        ready = ctx->own_ready = host_addrs_init(&ctx->own) == 0;
    if (ready)
        ready = pthread_mutex_init(&ctx->lock, NULL) == 0;
    if (!ready) {
        int e = errno;
        if (ctx->denial_fd >= 0)
            close(ctx->denial_fd);
        if (ctx->own_ready)
            host_addrs_free(&ctx->own);
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
