/* Unit tests of a live mediator (relay/mediator*.c, spec/unit/mediator_fixture.h)
 * between a Unix-socket client (this process) and upstreams on 127.0.0.1: HTTP CONNECT,
 * absolute-form requests, one request per connection, malformed requests, SOCKS5, and
 * the denial records all of them leave; then nothing leaked and the mediator stops
 * promptly. Loopback only: nothing here contacts another host. */
#include <strings.h>

#include "mediator_fixture.h"

static const char DENY_403[] =
    "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/* The other upstreams: one whose accept queue is full, one bound but closed, and a port
 * nobody grants. */
static int black_port, closed_port, other_port;

static char root[64];

/* ---------------------------------------------------------------- recording upstream */

/* A keep-alive HTTP upstream that records every byte it receives on a connection: it
 * reads one request (head, then Content-Length bytes of body), answers it with a framed
 * response, then keeps reading for REC_LINGER_MS more (as a server waiting for the next
 * request would) before it closes and publishes what it got. */
enum { REC_MAX = 512 * 1024, REC_LINGER_MS = 400 };
static int rec_listen = -1, rec_port;
static pthread_cond_t rec_cond = PTHREAD_COND_INITIALIZER;
static char *rec_raw;
static size_t rec_len;
static int rec_gen;

static size_t rec_content_length(const char *head, const char *end)
{
    for (const char *p = head; (p = strchr(p, '\n')) != NULL && p < end;) {
        p++;
        if (strncasecmp(p, "Content-Length:", 15) == 0)
            return (size_t)strtoul(p + 15, NULL, 10);
    }
    return 0;
}

static void *rec_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char *buf = malloc(REC_MAX + 1);
    size_t len = 0, want = 0;
    bool answered = false;
    unsigned long long linger_end = 0;
    if (!buf)
        abort();
    for (;;) {
        int wait_ms = 5000;
        if (answered) {
            unsigned long long now = a3s_now_ms();
            if (now >= linger_end)
                break;
            wait_ms = (int)(linger_end - now);
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, wait_ms) <= 0)
            break;
        ssize_t n = recv(fd, buf + len, REC_MAX - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        char *end = answered ? NULL : strstr(buf, "\r\n\r\n");
        if (end && !want)
            want = (size_t)(end + 4 - buf) + rec_content_length(buf, end);
        if (end && len >= want) {
            static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            (void)send(fd, resp, sizeof resp - 1, MSG_NOSIGNAL);
            answered = true;
            linger_end = a3s_now_ms() + REC_LINGER_MS;
        }
        if (len == REC_MAX)
            break;
    }
    close(fd);
    pthread_mutex_lock(&up_lock);
    free(rec_raw);
    rec_raw = buf;
    rec_len = len;
    rec_gen++;
    pthread_cond_broadcast(&rec_cond);
    pthread_mutex_unlock(&up_lock);
    return NULL;
}

static void *rec_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept4(rec_listen, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        pthread_t t;
        if (pthread_create(&t, NULL, rec_conn, (void *)(intptr_t)fd) != 0)
            close(fd);
        else
            pthread_detach(t);
    }
}

static int rec_generation(void)
{
    pthread_mutex_lock(&up_lock);
    int g = rec_gen;
    pthread_mutex_unlock(&up_lock);
    return g;
}

/* What the recording upstream got on the next connection it finished after `gen`
 * (malloc'd copy, NUL-terminated; NULL after 5 s). */
static char *rec_wait(int gen, size_t *len)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    char *copy = NULL;
    pthread_mutex_lock(&up_lock);
    while (rec_gen == gen)
        if (pthread_cond_timedwait(&rec_cond, &up_lock, &until) != 0)
            break;
    if (rec_gen != gen && (copy = malloc(rec_len + 1)) != NULL) {
        memcpy(copy, rec_raw, rec_len);
        copy[rec_len] = '\0';
        *len = rec_len;
    }
    pthread_mutex_unlock(&up_lock);
    return copy;
}

static int count_substr(const char *hay, size_t n, const char *needle)
{
    int k = 0;
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= n; i++)
        if (memcmp(hay + i, needle, nl) == 0)
            k++;
    return k;
}

/* ---------------------------------------------------------------- live: HTTP */

static void test_live_connect(void)
{
    int fd = med_connect();
    char req[512], resp[1024];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
             up_port, up_port);
    send_str(fd, req);
    read_head(fd, resp, sizeof resp);
    ok_streq(resp, "HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT allowed -> 200");
    char pong[9] = "";
    send_str(fd, "ping");
    ok(read_n(fd, pong, 4) == 4 && memcmp(pong, "pong", 4) == 0, "tunnel: ping -> pong");
    send_str(fd, "pingping");
    ok(read_n(fd, pong, 8) == 8 && memcmp(pong, "pongpong", 8) == 0, "tunnel: more traffic relayed");
    shutdown(fd, SHUT_WR);
    ok(read_all(fd, resp, sizeof resp) == 0, "tunnel: client EOF reaches upstream, which closes");
    close(fd);

    /* Bytes sent right behind the head (a TLS hello would be) are not lost. */
    fd = med_connect();
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\nping", up_port);
    send_str(fd, req);
    read_head(fd, resp, sizeof resp);
    ok(strncmp(resp, "HTTP/1.1 200", 12) == 0 && read_n(fd, pong, 4) == 4 &&
           memcmp(pong, "pong", 4) == 0,
       "CONNECT: early data after the head is forwarded");
    close(fd);

    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", other_port);
    int before = upstream_accepts();
    fd = med_connect();
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    close(fd);
    sleep_ms(200);
    ok_streq(resp, DENY_403, "CONNECT to a port outside the grant -> exact 403");
    ok(upstream_accepts() == before, "denied CONNECT: upstream never accepted (200 ms)");

    snprintf(req, sizeof req, "CONNECT example.com:443 HTTP/1.1\r\n\r\n");
    expect_refused(req, strlen(req), "HTTP/1.1 403",
                   "CONNECT to a host outside the grants");
    snprintf(req, sizeof req, "CONNECT [::1]:%d HTTP/1.1\r\n\r\n", up_port);
    expect_refused(req, strlen(req), "HTTP/1.1 403", "CONNECT to an ungranted IPv6 literal");
    snprintf(req, sizeof req, "CONNECT localhost:%d HTTP/1.1\r\n\r\n", up_port);
    expect_refused(req, strlen(req), "HTTP/1.1 403",
                   "grant 'localhost': CONNECT localhost resolves to loopback, refused");
    snprintf(req, sizeof req, "CONNECT LocalHost:%d HTTP/1.1\r\n\r\n", up_port);
    expect_refused(req, strlen(req), "HTTP/1.1 403", "grant 'localhost': any case, still refused");

    /* Upstream refuses (bound, not listening) and upstream silent (backlog full). */
    unsigned long long t0 = a3s_now_ms();
    fd = med_connect();
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", closed_port);
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    close(fd);
    unsigned long long ref = a3s_now_ms() - t0;
    ok(strncmp(resp, "HTTP/1.1 502", 12) == 0, "CONNECT to a refusing upstream -> 502 (%.12s)", resp);
    fd = med_connect();
    patient(fd);
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", black_port);
    t0 = a3s_now_ms();
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    unsigned long long dt = a3s_now_ms() - t0;
    close(fd);
    /* Never early (the clock starts before the request); late only within the bound. */
    unsigned long long bound = bound_ms(1000, ref);
    ok(strncmp(resp, "HTTP/1.1 504", 12) == 0 && dt >= 800 && dt < bound,
       "CONNECT to a silent upstream -> 504 after the connect timeout (%.12s, %llu ms < %llu ms)",
       resp, dt, bound);
}

static void test_live_absolute(void)
{
    char req[1024], resp[1024];
    snprintf(req, sizeof req,
             "GET http://127.0.0.1:%d/v1/x?q=1 HTTP/1.1\r\nHost: evil.example\r\n"
             "Proxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Hop\r\n"
             "X-Hop: drop-me\r\nKeep-Alive: 5\r\nUser-Agent: t/1\r\nAccept: */*\r\n\r\n",
             up_port);
    int fd = med_connect();
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    close(fd);
    ok_streq(resp, "HTTP/1.0 200 OK\r\n\r\nbody", "absolute GET forwarded, response streamed back");
    pthread_mutex_lock(&up_lock);
    char head[8192];
    snprintf(head, sizeof head, "%s", up_head);
    up_head[0] = '\0';
    pthread_mutex_unlock(&up_lock);
    char host[64];
    snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%d\r\n", up_port);
    ok(strncmp(head, "GET /v1/x?q=1 HTTP/1.1\r\n", 24) == 0, "upstream got origin-form request line");
    ok(strstr(head, host) != NULL, "upstream got our Host header");
    ok(strstr(head, "\r\nUser-Agent: t/1\r\n") && strstr(head, "\r\nAccept: */*\r\n"),
       "upstream got the end-to-end headers");
    ok(strstr(head, "\r\nConnection: close\r\n\r\n") != NULL, "upstream got Connection: close last");
    ok(!strstr(head, "Proxy-Authorization") && !strstr(head, "c2VjcmV0") &&
           !strstr(head, "X-Hop") && !strstr(head, "keep-alive") && !strstr(head, "Keep-Alive") &&
           !strstr(head, "evil.example"),
       "upstream got no hop-by-hop headers, nothing named by Connection, no client Host");

    fd = med_connect();
    snprintf(req, sizeof req,
             "POST http://127.0.0.1:%d/v1/submit HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", up_port);
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    close(fd);
    pthread_mutex_lock(&up_lock);
    snprintf(head, sizeof head, "%s", up_head);
    pthread_mutex_unlock(&up_lock);
    ok(strncmp(resp, "HTTP/1.0 200", 12) == 0 && strncmp(head, "POST /v1/submit HTTP/1.1\r\n", 26) == 0 &&
           strstr(head, "\r\nContent-Length: 3\r\n"),
       "absolute POST forwarded with its Content-Length");

    snprintf(req, sizeof req, "GET http://127.0.0.1:%d/v1/x HTTP/1.1\r\n\r\n", other_port);
    expect_refused(req, strlen(req), "HTTP/1.1 403", "absolute GET to an ungranted port");
    static const char *const paths[] = {"/v1/../admin", "/v1/%2e%2e/admin", "/v1/%2E%2E/admin",
                                        "/./x",         "/v1%2fadmin",      "/v1%5Cadmin",
                                        "/v1/.."};
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        snprintf(req, sizeof req,
                 "GET http://127.0.0.1:%d%s HTTP/1.1\r\nAuthorization: Bearer hunter2\r\n\r\n",
                 up_port, paths[i]);
        char what[96];
        snprintf(what, sizeof what, "absolute GET with path %s", paths[i]);
        expect_refused(req, strlen(req), "HTTP/1.1 400", what);
    }
    snprintf(req, sizeof req, "GET https://127.0.0.1:%d/v1/x HTTP/1.1\r\n\r\n", up_port);
    expect_refused(req, strlen(req), "HTTP/1.1 403", "https:// absolute target (no TLS interception)");
    snprintf(req, sizeof req,
             "POST http://127.0.0.1:%d/v1/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
             "3\r\nabc\r\n0\r\n\r\n",
             up_port);
    expect_refused(req, strlen(req), "HTTP/1.1 400", "chunked body");
}

/* Absolute-form HTTP is one request per connection: the first head (Connection: close)
 * and exactly its Content-Length body reach the upstream, nothing after it ever does. */
static void test_live_one_request(void)
{
    char req[1024], resp[2048];
    size_t rl = 0;
    int gen = rec_generation();
    int fd = med_connect();
    int n = snprintf(req, sizeof req,
                     "GET http://127.0.0.1:%d/first HTTP/1.1\r\nHost: x\r\n\r\n"
                     "GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                     "GET http://127.0.0.1:%d/third HTTP/1.1\r\n\r\n",
                     rec_port, rec_port);
    send_buf(fd, req, (size_t)n);
    read_all(fd, resp, sizeof resp);
    close(fd);
    char *raw = rec_wait(gen, &rl);
    ok(raw && strncmp(raw, "GET /first HTTP/1.1\r\n", 21) == 0 &&
           count_substr(raw, rl, " HTTP/1.") == 1 && !strstr(raw, "/admin") &&
           !strstr(raw, "/third") && rl >= 4 && memcmp(raw + rl - 4, "\r\n\r\n", 4) == 0,
       "pipelined in one write: the upstream saw exactly one request line (%zu bytes: '%.60s')", rl,
       raw ? shown(raw) : "(none)");
    ok(strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) == 0 && strstr(resp, "\r\n\r\nok") &&
           count_substr(resp, strlen(resp), "HTTP/1.") == 1,
       "pipelined: the client got the one upstream response, then the close");
    free(raw);

    /* The second request sent only once the first answer arrived. */
    gen = rec_generation();
    fd = med_connect();
    n = snprintf(req, sizeof req, "GET http://127.0.0.1:%d/one HTTP/1.1\r\n\r\n", rec_port);
    send_buf(fd, req, (size_t)n);
    size_t hl = read_head(fd, resp, sizeof resp);
    char two[3] = "";
    bool first_ok = hl > 0 && strncmp(resp, "HTTP/1.1 200", 12) == 0 && read_n(fd, two, 2) == 2;
    n = snprintf(req, sizeof req, "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    send_buf(fd, req, (size_t)n);
    read_all(fd, resp, sizeof resp);
    close(fd);
    raw = rec_wait(gen, &rl);
    ok(first_ok && raw && count_substr(raw, rl, " HTTP/1.") == 1 && !strstr(raw, "smuggled"),
       "second request after the first answer never reaches the upstream ('%.60s')",
       raw ? shown(raw) : "(none)");
    free(raw);

    /* "Connection: content-length" must not turn the body into a request. */
    static const char inner[] = "GET /admin HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    gen = rec_generation();
    fd = med_connect();
    n = snprintf(req, sizeof req,
                 "POST http://127.0.0.1:%d/x HTTP/1.1\r\nConnection: content-length\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 rec_port, sizeof inner - 1, inner);
    send_buf(fd, req, (size_t)n);
    read_all(fd, resp, sizeof resp);
    close(fd);
    raw = rec_wait(gen, &rl);
    char cl[64];
    snprintf(cl, sizeof cl, "\r\nContent-Length: %zu\r\n", sizeof inner - 1);
    char *body = raw ? strstr(raw, "\r\n\r\n") : NULL;
    ok(raw && body && strstr(raw, cl) && strstr(raw, cl) < body &&
           (size_t)(body + 4 - raw) + sizeof inner - 1 == rl &&
           memcmp(body + 4, inner, sizeof inner - 1) == 0,
       "Connection: content-length: the length is kept, the body stays a body ('%.60s')",
       raw ? shown(raw) : "(none)");
    free(raw);
    gen = rec_generation();
    fd = med_connect();
    n = snprintf(req, sizeof req,
                 "POST http://127.0.0.1:%d/x HTTP/1.1\r\nConnection: Content-Length, "
                 "Transfer-Encoding, Host\r\nContent-Length: %zu\r\n\r\n%s",
                 rec_port, sizeof inner - 1, inner);
    send_buf(fd, req, (size_t)n);
    read_all(fd, resp, sizeof resp);
    close(fd);
    raw = rec_wait(gen, &rl);
    body = raw ? strstr(raw, "\r\n\r\n") : NULL;
    ok(raw && body && strstr(raw, cl) && (size_t)(body + 4 - raw) + sizeof inner - 1 == rl,
       "Connection naming Content-Length (any case, in a list): length kept");
    free(raw);

    /* The body, exactly: nothing the client sends after it goes up. */
    gen = rec_generation();
    fd = med_connect();
    n = snprintf(req, sizeof req,
                 "POST http://127.0.0.1:%d/b HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloEXTRA"
                 "GET /after HTTP/1.1\r\n\r\n",
                 rec_port);
    send_buf(fd, req, (size_t)n);
    read_all(fd, resp, sizeof resp);
    close(fd);
    raw = rec_wait(gen, &rl);
    ok(raw && rl > 9 && memcmp(raw + rl - 9, "\r\n\r\nhello", 9) == 0 && !strstr(raw, "EXTRA") &&
           !strstr(raw, "/after"),
       "body of 5 forwarded exactly, the bytes behind it dropped ('%.60s')",
       raw ? shown(raw + (rl > 40 ? rl - 40 : 0)) : "(none)");
    free(raw);

    /* A large body in many writes, and extra bytes behind it. */
    enum { BIG = 200000 };
    char *big = malloc(BIG + 64);
    if (!big)
        abort();
    for (size_t i = 0; i < BIG; i++)
        big[i] = (char)('a' + i % 23);
    static const char tail[] = "GET /tail HTTP/1.1\r\n\r\n!";
    memcpy(big + BIG, tail, 24);
    gen = rec_generation();
    fd = med_connect();
    n = snprintf(req, sizeof req,
                 "PUT http://127.0.0.1:%d/big HTTP/1.1\r\nContent-Length: %d\r\n\r\n", rec_port,
                 BIG);
    send_buf(fd, req, (size_t)n);
    for (size_t off = 0; off < BIG + 24; off += 7001)
        send_buf(fd, big + off, off + 7001 <= BIG + 24 ? 7001 : BIG + 24 - off);
    read_all(fd, resp, sizeof resp);
    close(fd);
    raw = rec_wait(gen, &rl);
    body = raw ? strstr(raw, "\r\n\r\n") : NULL;
    ok(raw && body && (size_t)(body + 4 - raw) + BIG == rl && memcmp(body + 4, big, BIG) == 0 &&
           strncmp(resp, "HTTP/1.1 200", 12) == 0,
       "200000-byte body in 7001-byte writes: exactly the body reached the upstream (%zu)", rl);
    free(raw);
    free(big);

    /* No Content-Length: no body; what follows the head is never forwarded. */
    gen = rec_generation();
    fd = med_connect();
    n = snprintf(req, sizeof req, "POST http://127.0.0.1:%d/nolen HTTP/1.1\r\n\r\nsneaky",
                 rec_port);
    send_buf(fd, req, (size_t)n);
    read_all(fd, resp, sizeof resp);
    close(fd);
    raw = rec_wait(gen, &rl);
    ok(raw && !strstr(raw, "sneaky") && rl >= 4 && memcmp(raw + rl - 4, "\r\n\r\n", 4) == 0,
       "no Content-Length: nothing after the head reaches the upstream");
    free(raw);
}

static void test_live_malformed(void)
{
    char req[512];
    for (size_t i = 0; i < sizeof bad_connect_corpus / sizeof *bad_connect_corpus; i++) {
        snprintf(req, sizeof req, "%s\r\n\r\n", bad_connect_corpus[i]);
        char what[96];
        snprintf(what, sizeof what, "malformed CONNECT '%s'", bad_connect_corpus[i]);
        expect_refused(req, strlen(req), "HTTP/1.1 400", what);
    }
    /* More, all aimed at the real upstream so a leak would show (the last '@'
     * is its port). */
    const char *fmts[] = {
        "CONNECT 127.0.0.1:@ HTTP/1.1 junk\r\n\r\n",
        "CONNECT 127.0.0.1:@0000 HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:@99999999999999999999 HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:@ HTTP/2.0\r\n\r\n",
        "CONNECT 127.0.0.1:@ HTTP/1.1\n\n",
        "CONNECT 127.0.0.1:@ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "CONNECT 127.0.0.1:@ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        "CONNECT 127.1:@ HTTP/1.1\r\n\r\n",
        "CONNECT 2130706433:@ HTTP/1.1\r\n\r\n",
        "CONNECT user@127.0.0.1:@ HTTP/1.1\r\n\r\n",
        "CONNECT [127.0.0.1]:@ HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:+@ HTTP/1.1\r\n\r\n",
        "CONNECT\t127.0.0.1:@ HTTP/1.1\r\n\r\n",
        "CONNECT 127.0.0.1:@\r\n\r\n",
        "GET http://127.0.0.1:@/ HTTP/1.1\r\nHost : x\r\n\r\n",
        "GET http://127.0.0.1:@ HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof fmts / sizeof *fmts; i++) {
        const char *at = strrchr(fmts[i], '@');
        snprintf(req, sizeof req, "%.*s%d%s", (int)(at - fmts[i]), fmts[i], up_port, at + 1);
        char what[120];
        snprintf(what, sizeof what, "malformed: %.60s", req);
        expect_refused(req, strlen(req), "HTTP/1.1 400", what);
    }
    char nul[128];
    int n = snprintf(nul, sizeof nul, "CONNECT 127.0.0.1:%d", up_port);
    memcpy(nul + n, "\0 HTTP/1.1\r\n\r\n", 15);
    expect_refused(nul, (size_t)n + 15, "HTTP/1.1 400", "malformed: NUL byte in the request line");
    static const unsigned char garbage[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01,
                                            0xfc, 0x03, 0x03, 0xde, 0xad, 0xbe, 0xef};
    expect_refused(garbage, sizeof garbage, "HTTP/1.1 400", "garbage: a TLS ClientHello");
    expect_refused("\xff\xfe\x00\x01\r\n\r\n", 8, "HTTP/1.1 400", "garbage: binary bytes");
    expect_refused("SSH-2.0-OpenSSH_9.0\r\n", 21, "HTTP/1.1 400", "garbage: an SSH banner");

    /* 8 KiB without a line end: refused as soon as it is in, not at a timeout. */
    size_t big = 200 * 1024;
    char *b = malloc(big);
    if (!b)
        abort();
    n = snprintf(b, big, "GET http://127.0.0.1:%d/", up_port);
    memset(b + n, 'a', big - (size_t)n);
    int before = upstream_accepts();
    int fd = med_connect();
    unsigned long long t0 = a3s_now_ms();
    send_buf(fd, b, 9000);
    char resp[512];
    read_all(fd, resp, sizeof resp);
    unsigned long long dt = a3s_now_ms() - t0;
    close(fd);
    /* At the idle timeout an incomplete request gets no answer at all: a 400 means it was
     * refused for its size, when it came in, whatever the time on a loaded machine. */
    ok(strncmp(resp, "HTTP/1.1 400", 12) == 0,
       "9000-byte line without LF -> 400 at once (%llu ms, idle timeout is 3000)", dt);

    /* 200 KB without a line end: refused, the mediator keeps its bound and survives. */
    fd = med_connect();
    send_buf(fd, b, big);
    read_all(fd, resp, sizeof resp);
    close(fd);
    free(b);
    sleep_ms(200);
    ok(strncmp(resp, "HTTP/1.1 200", 12) != 0 && upstream_accepts() == before,
       "200 KB line without LF: refused, never reaches upstream");
    ok(mediator_alive() && connect_and_ping(), "after malformed input the mediator still serves");
}

/* ---------------------------------------------------------------- live: SOCKS5 */

static void test_live_socks(void)
{
    unsigned char m[300];
    size_t n = socks_connect_req(m, 1, "127.0.0.1", up_port);
    int fd = -1;
    ok(socks_exchange(m, n, &fd) == 0, "SOCKS5 domain 127.0.0.1 allowed -> reply 00");
    char pong[5] = "";
    send_str(fd, "ping");
    ok(read_n(fd, pong, 4) == 4 && memcmp(pong, "pong", 4) == 0, "SOCKS5 tunnel: ping -> pong");
    close(fd);

    /* IPv4 ATYP, greeting and request in one write (optimistic clients do this). */
    unsigned char v4[] = {5, 1, 0, 5, 1, 0, 1, 127, 0, 0, 1, (unsigned char)(up_port >> 8),
                          (unsigned char)up_port, 'p', 'i', 'n', 'g'};
    fd = med_connect();
    send_buf(fd, v4, sizeof v4);
    unsigned char rep[12];
    ok(read_n(fd, rep, 12) == 12 && rep[0] == 5 && rep[1] == 0 && rep[2] == 5 && rep[3] == 0,
       "SOCKS5 IPv4 ATYP allowed -> 05 00, then reply 00");
    ok(read_n(fd, pong, 4) == 4 && memcmp(pong, "pong", 4) == 0,
       "SOCKS5: bytes sent right behind the request are relayed");
    close(fd);

    int before = upstream_accepts();
    n = socks_connect_req(m, 1, "127.0.0.1", other_port);
    ok(socks_exchange(m, n, NULL) == 2, "SOCKS5 ungranted port -> reply 02");
    n = socks_connect_req(m, 1, "example.com", 443);
    ok(socks_exchange(m, n, NULL) == 2, "SOCKS5 ungranted host -> reply 02");
    n = socks_connect_req(m, 1, "localhost", up_port);
    ok(socks_exchange(m, n, NULL) == 2, "SOCKS5 'localhost' (granted) resolves internal -> 02");
    unsigned char v6[22] = {5, 1, 0, 4};
    v6[19] = 1;
    v6[20] = (unsigned char)(up_port >> 8);
    v6[21] = (unsigned char)up_port;
    ok(socks_exchange(v6, sizeof v6, NULL) == 2, "SOCKS5 IPv6 ::1 ungranted -> 02");
    n = socks_connect_req(m, 2, "127.0.0.1", up_port);
    ok(socks_exchange(m, n, NULL) == 7, "SOCKS5 BIND -> 07");
    n = socks_connect_req(m, 3, "127.0.0.1", up_port);
    ok(socks_exchange(m, n, NULL) == 7, "SOCKS5 UDP ASSOCIATE -> 07");
    unsigned char atyp[] = {5, 1, 0, 9, 0, 0};
    ok(socks_exchange(atyp, sizeof atyp, NULL) == 8, "SOCKS5 unknown address type -> 08");
    unsigned char rsv[] = {5, 1, 1, 1, 127, 0, 0, 1, 0, 80};
    ok(socks_exchange(rsv, sizeof rsv, NULL) == 1, "SOCKS5 malformed request -> 01");
    sleep_ms(200);
    ok(upstream_accepts() == before, "SOCKS5 refusals never reached upstream");

    fd = med_connect();
    send_buf(fd, "\x05\x01\x02", 3);
    ok(read_all(fd, (char *)rep, sizeof rep) == 2 && rep[0] == 5 && rep[1] == 0xff,
       "SOCKS5 without 'no authentication' -> 05 FF and close");
    close(fd);

    n = socks_connect_req(m, 1, "127.0.0.1", closed_port);
    ok(socks_exchange(m, n, NULL) == 5, "SOCKS5 upstream refuses -> 05");
}

/* ---------------------------------------------------------------- denial records */

static void test_denials(void)
{
    json_t *arr = json_array();
    json_t *summary = NULL;
    int records = 0, lines = read_denials(main_med.denials, arr, &records, &summary);
    ok(lines > 0, "denials: file readable, one JSON object per line, nothing after the summary");
    int good = 0;
    bool leak = false;
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        char *text = json_dumps(o, JSON_COMPACT);
        if (!text || strstr(text, "hunter2") || strstr(text, "c2VjcmV0") || strstr(text, "Bearer"))
            leak = true;
        free(text);
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *dec = json_string_value(json_object_get(o, "decision"));
        const char *proto = json_string_value(json_object_get(o, "protocol"));
        if (kind && strcmp(kind, "network") == 0 && dec && strcmp(dec, "deny") == 0 && proto &&
            (strcmp(proto, "http-connect") == 0 || strcmp(proto, "http") == 0 ||
             strcmp(proto, "socks5") == 0) &&
            json_is_string(json_object_get(o, "target")) &&
            json_is_string(json_object_get(o, "reason")) && json_object_size(o) == 5)
            good++;
    }
    ok(records > 40 && good == records,
       "denials: %d records, all one JSON object each with the schema", records);
    json_int_t total = json_integer_value(json_object_get(summary, "total"));
    json_int_t sum = 0;
    const char *key;
    json_t *v;
    json_object_foreach(json_object_get(summary, "counts"), key, v) sum += json_integer_value(v);
    ok(summary && lines == records + 1 && total == records && sum == total &&
           json_integer_value(json_object_get(summary, "dropped")) == 0,
       "denials: one summary line last, counting all %d records, none dropped", records);
    json_decref(summary);
    ok(!leak, "denials: no header values leak into the records");
    char t[64];
    snprintf(t, sizeof t, "127.0.0.1:%d", other_port);
    ok(has_record(arr, "http-connect", t, "not granted"), "denials: CONNECT not granted, with target");
    ok(has_record(arr, "http", t, "not granted"), "denials: absolute GET not granted");
    ok(has_record(arr, "socks5", t, "not granted"), "denials: SOCKS not granted");
    snprintf(t, sizeof t, "[::1]:%d", up_port);
    ok(has_record(arr, "http-connect", t, "not granted"), "denials: IPv6 target in brackets");
    snprintf(t, sizeof t, "localhost:%d", up_port);
    ok(has_record(arr, "http-connect", t, "internal address"), "denials: CONNECT internal address");
    ok(has_record(arr, "socks5", t, "internal address"), "denials: SOCKS internal address");
    snprintf(t, sizeof t, "127.0.0.1:%d", up_port);
    ok(has_record(arr, "socks5", t, "unsupported command"), "denials: SOCKS BIND");
    ok(has_record(arr, "http-connect", "", "malformed request"), "denials: malformed CONNECT");
    ok(has_record(arr, "http", "", "malformed request"), "denials: malformed HTTP");
    ok(has_record(arr, "http", "", "request too large"), "denials: overlong line");
    ok(has_record(arr, "http", "", "tls interception refused"), "denials: https target");
    ok(has_record(arr, NULL, NULL, "chunked body refused"), "denials: chunked body");
    ok(has_record(arr, "socks5", "", "no acceptable auth method"), "denials: SOCKS no auth");
    ok(has_record(arr, "socks5", "", "unsupported address type"), "denials: SOCKS ATYP");
    json_decref(arr);
}

/* ---------------------------------------------------------------- main */

static void cleanup(void)
{
    if (main_med.pid > 0) {
        kill(main_med.pid, SIGKILL);
        waitpid(main_med.pid, NULL, 0);
    }
    if (main_med.sock[0])
        unlink(main_med.sock);
    if (main_med.denials[0])
        unlink(main_med.denials);
    rmdir(root);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);

    a3s_mediator_opts bad = {0};
    ok(a3s_mediator_serve(-1, 0, NULL, 0, -1, &bad) == -1, "serve: invalid listen fd -> -1");

    snprintf(root, sizeof root, "/tmp/a3s-mediator-test-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(main_med.sock, sizeof main_med.sock, "%s/m.sock", root);
    snprintf(main_med.denials, sizeof main_med.denials, "%s/denials.jsonl", root);
    atexit(cleanup);

    /* Upstreams: one answering, one whose accept queue is full, one bound but closed. */
    up_listen = tcp_socket_on_loopback(&up_port, 64);
    rec_listen = tcp_socket_on_loopback(&rec_port, 64);
    int black = tcp_socket_on_loopback(&black_port, 0);
    int closed = tcp_socket_on_loopback(&closed_port, -1);
    int filler[2];
    for (int i = 0; i < 2; i++) {
        filler[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)black_port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        (void)connect(filler[i], (struct sockaddr *)&sa, sizeof sa);
    }
    sleep_ms(50);
    other_port = up_port;
    do
        other_port = other_port % 65535 + 1;
    while (other_port == up_port || other_port == black_port || other_port == closed_port ||
           other_port == rec_port);

    char g0[32], g1[32], g2[32], g3[32];
    snprintf(g0, sizeof g0, "127.0.0.1:%d", up_port);
    snprintf(g1, sizeof g1, "127.0.0.1:%d", black_port);
    snprintf(g2, sizeof g2, "127.0.0.1:%d", closed_port);
    snprintf(g3, sizeof g3, "127.0.0.1:%d", rec_port);
    const char *grants[] = {g0, "localhost", g1, g2, g3};
    /* Every record of this one is checked: keep them all. */
    a3s_mediator_opts o = {.connect_timeout_ms = 1000,
                           .idle_timeout_ms = 3000,
                           .max_connections = 128,
                           .denial_records = 1024};
    start_mediator(&main_med, grants, 5, &o);
    pthread_t up, rec;
    if (pthread_create(&up, NULL, up_main, NULL) != 0 ||
        pthread_create(&rec, NULL, rec_main, NULL) != 0) {
        fprintf(stderr, "upstream thread\n");
        return 2;
    }
    sleep_ms(100);
    int fds0 = count_fds(main_med.pid);

    test_live_connect();
    test_live_absolute();
    test_live_one_request();
    test_live_malformed();
    test_live_socks();

    int fds1 = -1;
    for (int i = 0; i < 40 && fds1 != fds0; i++) {
        sleep_ms(100);
        fds1 = count_fds(main_med.pid);
    }
    ok(fds0 > 0 && fds1 == fds0, "mediator fds back to baseline (%d -> %d): nothing leaked", fds0, fds1);
    ok(mediator_alive(), "mediator alive after everything");

    unsigned long long t0 = a3s_now_ms();
    close(main_med.stop_w);
    int st = 0;
    pid_t w = waitpid(main_med.pid, &st, 0);
    unsigned long long dt = a3s_now_ms() - t0;
    ok(w == main_med.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 && dt < STOP_BOUND_MS,
       "stop: serve returns 0 promptly once stop_fd hangs up (%llu ms < %d ms)", dt, STOP_BOUND_MS);
    main_med.pid = -1;

    test_denials();
    close(black);
    close(closed);
    close(filler[0]);
    close(filler[1]);
    return tap_done();
}
