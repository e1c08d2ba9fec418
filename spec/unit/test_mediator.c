/* Unit tests for engine/mediator.c: grant parsing and matching, the address policy, the
 * HTTP and SOCKS5 parsers, and a live mediator (a3s_mediator_serve in a forked child)
 * between a Unix-socket client (this process) and an upstream on 127.0.0.1. Loopback
 * only: nothing here contacts another host. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mediator.h"
#include "tap.h"
#include "util.h"

static const char DENY_403[] =
    "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";

/* Test descriptions quote requests: keep TAP lines on one line. */
static const char *shown(const char *s)
{
    static char buf[4][128];
    static int k;
    char *o = buf[k++ % 4];
    size_t j = 0;
    for (; *s && j + 4 < sizeof buf[0]; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\r' || c == '\n') {
            o[j++] = '\\';
            o[j++] = c == '\r' ? 'r' : 'n';
        } else {
            o[j++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
        }
    }
    o[j] = '\0';
    return o;
}

/* ---------------------------------------------------------------- pure: grants */

static void test_grant_parse(void)
{
    a3s_grant g;
    a3s_error err;
    ok(a3s_grant_parse("api.example.com", &g, &err) == 0 && strcmp(g.host, "api.example.com") == 0 &&
           g.port == 0,
       "grant: bare host, any port");
    ok(a3s_grant_parse("API.Example.com:443", &g, &err) == 0 &&
           strcmp(g.host, "api.example.com") == 0 && g.port == 443,
       "grant: host lower-cased, port kept");
    ok(a3s_grant_parse("127.0.0.1:8080", &g, &err) == 0 && strcmp(g.host, "127.0.0.1") == 0 &&
           g.port == 8080,
       "grant: IPv4 literal with port");
    ok(a3s_grant_parse("[::1]:443", &g, &err) == 0 && strcmp(g.host, "::1") == 0 && g.port == 443,
       "grant: bracketed IPv6 with port, brackets dropped");
    ok(a3s_grant_parse("[2001:DB8:0:0::1]", &g, &err) == 0 && strcmp(g.host, "2001:db8::1") == 0 &&
           g.port == 0,
       "grant: IPv6 literal canonicalised");
    ok(a3s_grant_parse("a-b.c1.example:65535", &g, &err) == 0 && g.port == 65535,
       "grant: hyphens, digits, port 65535");

    static const char *const bad[] = {
        "",          "*",          "*.example.com", "api.*.com",   "a b",        "a/b",
        "a\\b",      "host:0",     "host:65536",    "host:x",      "user@host",  "host:",
        ":443",      "host:-1",    "host:+80",      "::1",         "[::1",       "[]:80",
        "[1.2.3.4]", "[::1]x",     "a..b",          ".a",          "a.",         "a_b",
        "h\tx",      "127.1",      "2130706433",    "1.2.3.4.5",   "ex?ample",   "host:80:80",
        "[::1]:0",   "h\x7fx",     "h\xc3\xa9x",    "host:080800",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        int rc = a3s_grant_parse(bad[i], &g, &err);
        ok(rc < 0 && err.code == A3S_ERR_INVALID && strstr(err.msg, "network grant"),
           "grant refused: '%s' (%s)", shown(bad[i]), err.msg);
    }
    char longname[400];
    memset(longname, 'a', sizeof longname);
    for (size_t i = 63; i < sizeof longname; i += 64)
        longname[i] = '.';
    longname[sizeof longname - 1] = '\0';
    ok(a3s_grant_parse(longname, &g, &err) < 0, "grant refused: name longer than 253");
    char label[80];
    memset(label, 'b', 64);
    strcpy(label + 64, ".com");
    ok(a3s_grant_parse(label, &g, &err) < 0, "grant refused: 64-byte label");
    ok(a3s_grant_parse(NULL, &g, &err) < 0, "grant refused: NULL");
}

static void test_grants_allow(void)
{
    a3s_grant g[3];
    a3s_error err;
    ok(a3s_grant_parse("api.example.com:443", &g[0], &err) == 0 &&
           a3s_grant_parse("localhost", &g[1], &err) == 0 &&
           a3s_grant_parse("10.0.0.5", &g[2], &err) == 0,
       "allow: grants parsed");
    ok(a3s_grants_allow(g, 3, "api.example.com", 443), "allow: exact host and port");
    ok(a3s_grants_allow(g, 3, "API.EXAMPLE.COM", 443), "allow: host case-insensitive");
    ok(!a3s_grants_allow(g, 3, "api.example.com", 8443), "allow: pinned port 443 refuses 8443");
    ok(!a3s_grants_allow(g, 3, "api.example.com", 80), "allow: pinned port refuses 80");
    ok(!a3s_grants_allow(g, 3, "www.api.example.com", 443), "allow: no subdomain matching");
    ok(!a3s_grants_allow(g, 3, "example.com", 443), "allow: no parent matching");
    ok(!a3s_grants_allow(g, 3, "api.example.com.", 443), "allow: trailing dot is another host");
    ok(a3s_grants_allow(g, 3, "localhost", 1) && a3s_grants_allow(g, 3, "localhost", 65535),
       "allow: portless grant allows any port");
    ok(!a3s_grants_allow(g, 3, "127.0.0.1", 80), "allow: localhost grant does not allow 127.0.0.1");
    ok(!a3s_grants_allow(g, 3, "::1", 80), "allow: localhost grant does not allow ::1");
    ok(a3s_grants_allow(g, 3, "10.0.0.5", 22), "allow: IP literal grant");
    ok(!a3s_grants_allow(g, 3, "10.0.0.50", 22), "allow: IP literal is exact");
    ok(!a3s_grants_allow(g, 3, "localhost", 0), "allow: port 0 never allowed");
    ok(!a3s_grants_allow(g, 3, "", 443) && !a3s_grants_allow(g, 3, NULL, 443),
       "allow: empty host refused");
    ok(!a3s_grants_allow(g, 0, "api.example.com", 443), "allow: no grants, nothing allowed");
    a3s_grant ip;
    ok(a3s_grant_parse("127.0.0.1", &ip, &err) == 0 && !a3s_grants_allow(&ip, 1, "localhost", 80) &&
           a3s_grants_allow(&ip, 1, "127.0.0.1", 80),
       "allow: 127.0.0.1 grant does not allow localhost");
}

static bool internal(const char *text)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(text, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
            abort();
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &s4->sin_addr) != 1)
            abort();
    }
    return a3s_addr_is_internal((struct sockaddr *)&ss);
}

static void test_addr_internal(void)
{
    static const char *const in[] = {
        "127.0.0.1",    "127.255.0.9",     "10.1.2.3",        "172.16.0.1",
        "172.31.255.254", "192.168.1.1",   "169.254.169.254", "169.254.0.1",
        "100.64.0.1",   "100.127.255.254", "0.0.0.0",         "224.0.0.1",
        "255.255.255.255", "::1",          "::",              "fe80::1",
        "fc00::1",      "fd00:ec2::254",   "ff02::1",         "::ffff:127.0.0.1",
        "::ffff:169.254.169.254", "64:ff9b::a00:1", "2002:a00:1::1",
    };
    static const char *const out[] = {
        "93.184.216.34", "2606:2800::1", "8.8.8.8", "172.32.0.1", "100.128.0.1",
        "192.169.0.1",   "1.1.1.1",      "::ffff:93.184.216.34",  "2a00:1450::1",
    };
    for (size_t i = 0; i < sizeof in / sizeof *in; i++)
        ok(internal(in[i]), "internal: %s", in[i]);
    for (size_t i = 0; i < sizeof out / sizeof *out; i++)
        ok(!internal(out[i]), "not internal: %s", out[i]);
    struct sockaddr_un su = {.sun_family = AF_UNIX};
    ok(a3s_addr_is_internal((struct sockaddr *)&su) && a3s_addr_is_internal(NULL),
       "internal: unknown family and NULL fail closed");
}

/* ---------------------------------------------------------------- pure: parsers */

static int parse_str(const char *s, a3s_http_req *r)
{
    return a3s_http_parse(s, strlen(s), r);
}

/* The original's gate7 malformed CONNECT corpus, reference §6.11. */
static const char *const gate7_corpus[] = {
    "",
    "GET / HTTP/1.1",
    "CONNECT",
    "CONNECT ",
    "CONNECT :443",
    "CONNECT /evil:443",
    "CONNECT example.com",
    "CONNECT example.com:",
    "CONNECT example.com:65536",
    "CONNECT example.com:-1",
    "CONNECT example.com:0x50",
    "CONNECT example.com:abc",
    "CONNECT example.com:443 extra junk trailing",
    "CONNECT  HTTP/1.1",
    "POST CONNECT example.com:443 HTTP/1.1",
};

static void test_http_parse(void)
{
    a3s_http_req r;
    char buf[512];
    for (size_t i = 0; i < sizeof gate7_corpus / sizeof *gate7_corpus; i++) {
        snprintf(buf, sizeof buf, "%s\r\n\r\n", gate7_corpus[i]);
        ok(parse_str(buf, &r) == -1, "http parse: gate7 corpus refused: '%s'", gate7_corpus[i]);
    }
    ok(a3s_http_parse("", 0, &r) == 0, "http parse: nothing yet -> need more");

    const char *s = "CONNECT api.example.com:443 HTTP/1.1\r\n\r\n";
    ok(parse_str(s, &r) == 1 && r.connect && strcmp(r.method, "CONNECT") == 0 &&
           strcmp(r.host, "api.example.com") == 0 && r.port == 443 && r.head_len == strlen(s),
       "http parse: canonical CONNECT");
    ok(parse_str("connect 127.0.0.1:9 HTTP/1.0\r\n\r\n", &r) == 1 && r.connect &&
           strcmp(r.method, "CONNECT") == 0 && strcmp(r.host, "127.0.0.1") == 0 && r.port == 9,
       "http parse: lower-case method, HTTP/1.0");
    ok(parse_str("CONNECT API.Example.COM:443 HTTP/1.1\r\nHost: x\r\n\r\n", &r) == 1 &&
           strcmp(r.host, "api.example.com") == 0,
       "http parse: host lower-cased");
    a3s_grant lo;
    a3s_error err;
    ok(parse_str("CONNECT [::1]:443 HTTP/1.1\r\n\r\n", &r) == 1 && strcmp(r.host, "::1") == 0 &&
           r.port == 443 && a3s_grant_parse("127.0.0.1", &lo, &err) == 0 &&
           !a3s_grants_allow(&lo, 1, r.host, r.port),
       "http parse: [::1]:443 parses but a 127.0.0.1 grant does not cover it");
    ok(parse_str("CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n", &r) == 0,
       "http parse: headers not finished -> need more");
    ok(parse_str("CONN", &r) == 0, "http parse: partial method -> need more");
    s = "GET http://a.example/c HTTP/1.1\r\nX: y\r\n\r\nBODY";
    ok(parse_str(s, &r) == 1 && r.head_len == strlen(s) - 4, "http parse: head_len excludes body");
    ok(parse_str("GET http://Example.com/v1/x?y=%2F HTTP/1.1\r\n\r\n", &r) == 1 && !r.connect &&
           strcmp(r.method, "GET") == 0 && strcmp(r.host, "example.com") == 0 && r.port == 80 &&
           strcmp(r.path, "/v1/x?y=%2F") == 0,
       "http parse: absolute GET, default port 80, query escapes allowed");
    ok(parse_str("DELETE HTTP://example.com:8080/ HTTP/1.1\r\n\r\n", &r) == 1 && r.port == 8080 &&
           strcmp(r.path, "/") == 0 && strcmp(r.method, "DELETE") == 0,
       "http parse: explicit port");
    ok(parse_str("OPTIONS http://[::1]:81/a/b.c/..d HTTP/1.1\r\n\r\n", &r) == 1 &&
           strcmp(r.host, "::1") == 0 && r.port == 81 && strcmp(r.path, "/a/b.c/..d") == 0,
       "http parse: IPv6 authority; '..d' is not a dot segment");
    ok(parse_str("POST http://a.example/x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", &r) == 1,
       "http parse: POST with Content-Length");

    static const char *const refused[] = {
        "GET http://a.example/v1/../admin HTTP/1.1\r\n\r\n",
        "GET http://a.example/v1/./x HTTP/1.1\r\n\r\n",
        "GET http://a.example/.. HTTP/1.1\r\n\r\n",
        "GET http://a.example/v1/. HTTP/1.1\r\n\r\n",
        "GET http://a.example/v1/%2e%2e/admin HTTP/1.1\r\n\r\n",
        "GET http://a.example/v1/%2E./admin HTTP/1.1\r\n\r\n",
        "GET http://a.example/v1/x%2ey HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%2fb HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%2Fb HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%5cb HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%5Cb HTTP/1.1\r\n\r\n",
        "GET http://a.example/a\\b HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%zz HTTP/1.1\r\n\r\n",
        "GET http://a.example/a% HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%0 HTTP/1.1\r\n\r\n",
        "GET http://a.example/a%00b HTTP/1.1\r\n\r\n",
        "GET http://a.example/a#frag HTTP/1.1\r\n\r\n",
        "GET http://a.example HTTP/1.1\r\n\r\n",
        "GET http://user@a.example/ HTTP/1.1\r\n\r\n",
        "GET http://a.example:0/ HTTP/1.1\r\n\r\n",
        "GET http://a.example?x=/ HTTP/1.1\r\n\r\n",
        "GET http://*.example/ HTTP/1.1\r\n\r\n",
        "GET ftp://a.example/ HTTP/1.1\r\n\r\n",
        "GET /relative HTTP/1.1\r\n\r\n",
        "GET http://a.example/ HTTP/2.0\r\n\r\n",
        "GET http://a.example/ http/1.1\r\n\r\n",
        "GET http://a.example/ HTTP/1.1 \r\n\r\n",
        "GET http://a.example/\tx HTTP/1.1\r\n\r\n",
        "TRACE http://a.example/ HTTP/1.1\r\n\r\n",
        "PROPFIND http://a.example/ HTTP/1.1\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "CONNECT a.example:443 HTTP/1.1\r\ntransfer-encoding: identity\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nContent-Length: 1 2\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nName : v\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nNo-colon\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\n: v\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\nX: a\n\n",
        "GET http://a.example/ HTTP/1.1\r\nX: a\n\r\n",
        "CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
        "CONNECT 2130706433:443 HTTP/1.1\r\n\r\n",
        "CONNECT [127.0.0.1]:443 HTTP/1.1\r\n\r\n",
        "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.example:+443 HTTP/1.1\r\n\r\n",
        "CONNECT a.example:4430000 HTTP/1.1\r\n\r\n",
        "CONNECT\ta.example:443 HTTP/1.1\r\n\r\n",
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        "\xff\xfe\xfd",
        "GETX",
        "OPTIONSX",
        "get\x01",
        "https://a.example/ HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        ok(parse_str(refused[i], &r) == -1, "http parse: refused #%zu: %s", i, shown(refused[i]));
    }
    ok(parse_str("GET https://a.example/ HTTP/1.1\r\n\r\n", &r) == -1,
       "http parse: https:// target refused");
    const char nul[] = "CONNECT a.example:443\0 HTTP/1.1\r\n\r\n";
    ok(a3s_http_parse(nul, sizeof nul - 1, &r) == -1, "http parse: NUL in request line refused");
    const char nulh[] = "CONNECT a.example:443 HTTP/1.1\r\nX: a\0b\r\n\r\n";
    ok(a3s_http_parse(nulh, sizeof nulh - 1, &r) == -1, "http parse: NUL in a header refused");

    /* Bounds, checked on what has arrived so far. */
    size_t big = 200 * 1024;
    char *b = malloc(big + 64);
    if (!b)
        abort();
    memcpy(b, "GET /", 5);
    memset(b + 5, 'a', big);
    ok(a3s_http_parse(b, 8191, &r) == 0, "http parse: 8191-byte line without LF -> need more");
    ok(a3s_http_parse(b, 8192, &r) == -1, "http parse: 8 KiB without LF -> refused at once");
    ok(a3s_http_parse(b, big, &r) == -1, "http parse: 200 KB without LF -> refused");
    /* 16 KiB of headers exactly (final CRLF included) is fine, one byte more is not. */
    const char *line = "CONNECT a.example:443 HTTP/1.1\r\n";
    size_t ll = strlen(line);
    memcpy(b, line, ll);
    memcpy(b + ll, "X: ", 3);
    memset(b + ll + 3, 'v', 16377);
    memcpy(b + ll + 3 + 16377, "\r\n\r\n", 4);
    ok(a3s_http_parse(b, ll + 16384, &r) == 1 && r.head_len == ll + 16384,
       "http parse: exactly 16 KiB of headers accepted");
    memcpy(b + ll, "X:  ", 4);
    memset(b + ll + 4, 'v', 16377);
    memcpy(b + ll + 4 + 16377, "\r\n\r\n", 4);
    ok(a3s_http_parse(b, ll + 16385, &r) == -1, "http parse: 16 KiB + 1 of headers refused");
    memset(b + ll, 'h', 20 * 1024);
    b[ll] = 'X';
    b[ll + 1] = ':';
    ok(a3s_http_parse(b, ll + 20 * 1024, &r) == -1,
       "http parse: 20 KiB header without end refused before it ends");
    memcpy(b, "GET http://a.example/", 21);
    memset(b + 21, 'p', 4200);
    memcpy(b + 21 + 4200, " HTTP/1.1\r\n\r\n", 13);
    ok(a3s_http_parse(b, 21 + 4200 + 13, &r) == -1, "http parse: path beyond 4 KiB refused");
    free(b);
    ok(a3s_http_parse(NULL, 5, &r) == -1 && a3s_http_parse("x", 1, NULL) == -1,
       "http parse: NULL arguments refused");
}

static void test_socks_parse(void)
{
    a3s_socks_req r;
    size_t used = 0;
    unsigned char m[64] = {5, 1, 0, 5, 1, 0, 3, 11};
    memcpy(m + 8, "EXAMPLE.com", 11);
    m[19] = 0x01;
    m[20] = 0xbb;
    ok(a3s_socks_parse(m, 21, &r, &used) == 1 && strcmp(r.host, "example.com") == 0 &&
           r.port == 443 && r.cmd == 1 && used == 21,
       "socks parse: greeting + domain CONNECT");
    bool all_more = true;
    for (size_t i = 0; i < 21; i++)
        if (a3s_socks_parse(m, i, &r, &used) != 0)
            all_more = false;
    ok(all_more, "socks parse: every strict prefix -> need more");
    m[21] = 'x';
    ok(a3s_socks_parse(m, 22, &r, &used) == 1 && used == 21, "socks parse: trailing bytes not consumed");

    unsigned char v4[] = {5, 2, 2, 0, 5, 1, 0, 1, 127, 0, 0, 1, 0x1f, 0x90};
    ok(a3s_socks_parse(v4, sizeof v4, &r, &used) == 1 && strcmp(r.host, "127.0.0.1") == 0 &&
           r.port == 8080 && used == sizeof v4,
       "socks parse: IPv4 ATYP, no-auth among several methods");
    unsigned char v6[25] = {5, 1, 0, 5, 1, 0, 4};
    v6[22] = 1; /* ::1 */
    v6[23] = 0;
    v6[24] = 80;
    ok(a3s_socks_parse(v6, sizeof v6, &r, &used) == 1 && strcmp(r.host, "::1") == 0 && r.port == 80,
       "socks parse: IPv6 ATYP as text");
    unsigned char bind[] = {5, 1, 0, 5, 2, 0, 1, 127, 0, 0, 1, 0, 80};
    ok(a3s_socks_parse(bind, sizeof bind, &r, &used) == 1 && r.cmd == 2,
       "socks parse: BIND parses with cmd 2 (the server answers 07)");

    static const struct {
        unsigned char b[24];
        size_t n;
        const char *what;
    } bad[] = {
        {{4, 1, 0}, 3, "version 4"},
        {{5, 1, 2}, 3, "no 'no authentication' method"},
        {{5, 0}, 2, "zero methods"},
        {{5, 1, 0, 4, 1, 0, 1, 1, 2, 3, 4, 0, 80}, 13, "request version 4"},
        {{5, 1, 0, 5, 1, 1, 1, 1, 2, 3, 4, 0, 80}, 13, "reserved byte set"},
        {{5, 1, 0, 5, 1, 0, 5, 1, 2, 3, 4, 0, 80}, 13, "address type 5"},
        {{5, 1, 0, 5, 1, 0, 3, 0, 0, 80}, 10, "empty domain"},
        {{5, 1, 0, 5, 1, 0, 3, 3, 'a', ' ', 'b', 0, 80}, 13, "space in domain"},
        {{5, 1, 0, 5, 1, 0, 3, 3, 'a', 0, 'b', 0, 80}, 13, "NUL in domain"},
        {{5, 1, 0, 5, 1, 0, 3, 3, '*', '.', 'b', 0, 80}, 13, "wildcard domain"},
        {{5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 0}, 13, "port 0"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ok(a3s_socks_parse(bad[i].b, bad[i].n, &r, &used) == -1, "socks parse: refused: %s",
           bad[i].what);
    ok(a3s_socks_parse(NULL, 3, &r, &used) == -1, "socks parse: NULL buffer refused");
}

/* ---------------------------------------------------------------- upstream on loopback */

static pthread_mutex_t up_lock = PTHREAD_MUTEX_INITIALIZER;
static int up_accepts;
static char up_head[8192];
static int up_listen = -1;
static int up_port, black_port, closed_port, other_port;

static int upstream_accepts(void)
{
    pthread_mutex_lock(&up_lock);
    int n = up_accepts;
    pthread_mutex_unlock(&up_lock);
    return n;
}

/* "ping" -> "pong" as often as asked; an HTTP head -> recorded, answered, closed. */
static void *up_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char buf[8192];
    size_t len = 0;
    for (;;) {
        ssize_t n = recv(fd, buf + len, sizeof buf - 1 - len, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
        while (len >= 4 && memcmp(buf, "ping", 4) == 0) {
            (void)send(fd, "pong", 4, MSG_NOSIGNAL);
            memmove(buf, buf + 4, len - 4);
            len -= 4;
            buf[len] = '\0';
        }
        char *end = strstr(buf, "\r\n\r\n");
        if (end) {
            pthread_mutex_lock(&up_lock);
            snprintf(up_head, sizeof up_head, "%.*s", (int)(end + 4 - buf), buf);
            pthread_mutex_unlock(&up_lock);
            static const char resp[] = "HTTP/1.0 200 OK\r\n\r\nbody";
            (void)send(fd, resp, sizeof resp - 1, MSG_NOSIGNAL);
            break;
        }
        if (len >= sizeof buf - 1)
            break;
    }
    close(fd);
    return NULL;
}

static void *up_main(void *arg)
{
    (void)arg;
    for (;;) {
        int fd = accept4(up_listen, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            return NULL;
        }
        pthread_mutex_lock(&up_lock);
        up_accepts++;
        pthread_mutex_unlock(&up_lock);
        pthread_t t;
        if (pthread_create(&t, NULL, up_conn, (void *)(intptr_t)fd) != 0)
            close(fd);
        else
            pthread_detach(t);
    }
}

static int tcp_socket_on_loopback(int *port, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        (backlog >= 0 && listen(fd, backlog) < 0) ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        perror("upstream socket");
        exit(2);
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

/* ---------------------------------------------------------------- the mediator child */

typedef struct mediator {
    pid_t pid;
    int stop_w;
    char sock[80], denials[96];
} mediator;

static char root[64];
/* The main mediator, and one with a long idle timeout for the connection-cap test; the
 * client helpers talk to `cur`. */
static mediator main_med = {.pid = -1, .stop_w = -1}, cap_med = {.pid = -1, .stop_w = -1};
static mediator *cur = &main_med;

static void start_mediator(mediator *m, const char *const *specs, size_t n,
                           const a3s_mediator_opts *o)
{
    a3s_grant g[8];
    a3s_error err;
    for (size_t i = 0; i < n; i++)
        if (a3s_grant_parse(specs[i], &g[i], &err) < 0) {
            fprintf(stderr, "grant %s: %s\n", specs[i], err.msg);
            exit(2);
        }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", m->sock);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int stop[2];
    int dfd = open(m->denials, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 512) < 0 ||
        pipe2(stop, O_CLOEXEC) < 0 || dfd < 0) {
        perror("mediator setup");
        exit(2);
    }
    fflush(stdout);
    m->pid = fork();
    if (m->pid < 0) {
        perror("fork");
        exit(2);
    }
    if (m->pid == 0) {
        close(stop[1]);
        int rc = a3s_mediator_serve(lfd, stop[0], g, n, dfd, o);
        _exit(rc == 0 ? 0 : 3);
    }
    close(lfd);
    close(dfd);
    close(stop[0]);
    m->stop_w = stop[1];
}

static int med_connect(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", cur->sock);
    struct timeval tv = {5, 0};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) < 0) {
        perror("connect to mediator");
        exit(2);
    }
    return fd;
}

static void send_buf(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the mediator may already have hung up: what it answered is checked */
        c += w;
        n -= (size_t)w;
    }
}

static void send_str(int fd, const char *s)
{
    send_buf(fd, s, strlen(s));
}

/* Read until the peer closes (a reset after its answer counts as closing). */
static size_t read_all(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return len;
}

static size_t read_n(int fd, void *buf, size_t want)
{
    size_t len = 0;
    while (len < want) {
        ssize_t n = recv(fd, (char *)buf + len, want - len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    return len;
}

/* Read an HTTP head (through CRLFCRLF) byte by byte, so nothing after it is consumed. */
static size_t read_head(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    while (len + 1 < cap) {
        ssize_t n = recv(fd, buf + len, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len++;
        if (len >= 4 && memcmp(buf + len - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    buf[len] = '\0';
    return len;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static bool mediator_alive(void)
{
    int st;
    return cur->pid > 0 && waitpid(cur->pid, &st, WNOHANG) == 0;
}

static int count_fds(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(p);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* An HTTP request whose answer we expect to be a refusal that never reaches upstream. */
static void expect_refused(const void *req, size_t n, const char *status, const char *what)
{
    int before = upstream_accepts();
    int fd = med_connect();
    send_buf(fd, req, n);
    char resp[1024];
    read_all(fd, resp, sizeof resp);
    close(fd);
    sleep_ms(200);
    ok(strncmp(resp, status, strlen(status)) == 0 && upstream_accepts() == before,
       "%s -> '%s', upstream untouched (got '%.20s')", shown(what), status, shown(resp));
}

static bool connect_and_ping(void)
{
    int fd = med_connect();
    char req[256], resp[512];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
             up_port, up_port);
    send_str(fd, req);
    read_head(fd, resp, sizeof resp);
    bool good = strcmp(resp, "HTTP/1.1 200 Connection established\r\n\r\n") == 0;
    char pong[5] = "";
    send_str(fd, "ping");
    good = good && read_n(fd, pong, 4) == 4 && memcmp(pong, "pong", 4) == 0;
    close(fd);
    return good;
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
    fd = med_connect();
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", closed_port);
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    close(fd);
    ok(strncmp(resp, "HTTP/1.1 502", 12) == 0, "CONNECT to a refusing upstream -> 502 (%.12s)", resp);
    fd = med_connect();
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", black_port);
    unsigned long long t0 = a3s_now_ms();
    send_str(fd, req);
    read_all(fd, resp, sizeof resp);
    unsigned long long dt = a3s_now_ms() - t0;
    close(fd);
    ok(strncmp(resp, "HTTP/1.1 504", 12) == 0 && dt >= 800 && dt < 4000,
       "CONNECT to a silent upstream -> 504 after the connect timeout (%.12s, %llu ms)", resp, dt);
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

static void test_live_malformed(void)
{
    char req[512];
    for (size_t i = 0; i < sizeof gate7_corpus / sizeof *gate7_corpus; i++) {
        snprintf(req, sizeof req, "%s\r\n\r\n", gate7_corpus[i]);
        char what[96];
        snprintf(what, sizeof what, "gate7 corpus '%s'", gate7_corpus[i]);
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
    ok(strncmp(resp, "HTTP/1.1 400", 12) == 0 && dt < 1500,
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

static size_t socks_connect_req(unsigned char *m, unsigned char cmd, const char *domain,
                                int port)
{
    size_t n = 0;
    m[n++] = 5;
    m[n++] = cmd;
    m[n++] = 0;
    m[n++] = 3;
    m[n++] = (unsigned char)strlen(domain);
    memcpy(m + n, domain, strlen(domain));
    n += strlen(domain);
    m[n++] = (unsigned char)(port >> 8);
    m[n++] = (unsigned char)port;
    return n;
}

/* Greeting, then request; returns the reply code (or -1), leaves *fdp open for relaying. */
static int socks_exchange(const unsigned char *req, size_t n, int *fdp)
{
    int fd = med_connect();
    send_buf(fd, "\x05\x01\x00", 3);
    unsigned char rep[10];
    if (read_n(fd, rep, 2) != 2 || rep[0] != 5 || rep[1] != 0) {
        close(fd);
        return -1;
    }
    send_buf(fd, req, n);
    int code = read_n(fd, rep, 10) == 10 && rep[0] == 5 ? rep[1] : -1;
    if (fdp)
        *fdp = fd;
    else
        close(fd);
    return code;
}

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

/* ---------------------------------------------------------------- live: timeouts, cap */

static void test_live_idle(void)
{
    int quiet = med_connect();
    int tunnel = med_connect();
    char req[128], resp[256];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", up_port);
    send_str(tunnel, req);
    read_head(tunnel, resp, sizeof resp);
    unsigned long long t0 = a3s_now_ms();
    ok(strncmp(resp, "HTTP/1.1 200", 12) == 0, "idle: tunnel open");
    size_t got = read_all(quiet, resp, sizeof resp);
    unsigned long long dq = a3s_now_ms() - t0;
    got += read_all(tunnel, resp, sizeof resp);
    unsigned long long dt = a3s_now_ms() - t0;
    ok(got == 0 && dq >= 2000 && dq < 4900, "idle: a silent client is dropped (%llu ms)", dq);
    ok(dt >= 2000 && dt < 4900, "idle: a silent tunnel is closed (%llu ms)", dt);
    close(quiet);
    close(tunnel);
}

/* 300 connections at once against the default cap (128) on a mediator whose idle timeout
 * is long, so the held ones stay held however slowly it runs (sanitizers). */
static void test_live_cap(void)
{
    enum { N = 300, CAP = 128 };
    cur = &cap_med;
    int fds[N];
    bool answered[N];
    char req[128];
    snprintf(req, sizeof req, "CONNECT 127.0.0.1:%d HTTP/1.1\r\n", up_port); /* no blank line */
    for (int i = 0; i < N; i++) {
        fds[i] = med_connect();
        answered[i] = false;
        if (i % 2)
            send_str(fds[i], req);
    }
    int busy = 0, other = 0;
    for (unsigned long long end = a3s_now_ms() + 8000; busy + other < N - CAP && a3s_now_ms() < end;) {
        for (int i = 0; i < N; i++) {
            struct pollfd p = {fds[i], POLLIN, 0};
            if (answered[i] || poll(&p, 1, 0) != 1)
                continue;
            char resp[256];
            ssize_t n = recv(fds[i], resp, sizeof resp - 1, MSG_DONTWAIT);
            resp[n > 0 ? n : 0] = '\0';
            answered[i] = true;
            if (strncmp(resp, "HTTP/1.1 503 ", 13) == 0)
                busy++;
            else
                other++;
        }
        sleep_ms(20);
    }
    sleep_ms(200); /* nobody else may be answered */
    for (int i = 0; i < N; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        if (!answered[i] && poll(&p, 1, 0) == 1)
            other++;
    }
    ok(busy == N - CAP && other == 0,
       "cap: %d of %d connections refused with 503 at once (cap %d), %d other answers", busy, N,
       CAP, other);
    ok(mediator_alive(), "cap: mediator alive with %d connections open", N);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    bool works = false;
    for (int tries = 0; tries < 50 && !works; tries++) {
        works = connect_and_ping();
        if (!works)
            sleep_ms(100);
    }
    ok(works, "cap: the next allowed CONNECT works once the crowd has gone");

    /* Stop with connections in flight: serve returns at once all the same. */
    int held[5];
    for (int i = 0; i < 5; i++)
        held[i] = med_connect();
    sleep_ms(100);
    unsigned long long t0 = a3s_now_ms();
    close(cap_med.stop_w);
    int st = 0;
    pid_t w = waitpid(cap_med.pid, &st, 0);
    unsigned long long dt = a3s_now_ms() - t0;
    ok(w == cap_med.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 && dt < 2000,
       "cap: stop with connections in flight returns 0 promptly (%llu ms)", dt);
    cap_med.pid = -1;
    for (int i = 0; i < 5; i++)
        close(held[i]);

    FILE *f = fopen(cap_med.denials, "re");
    int records = 0, lines = 0;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        const char *r = json_string_value(json_object_get(o, "reason"));
        if (r && strcmp(r, "too many connections") == 0)
            records++;
        json_decref(o);
    }
    if (f)
        fclose(f);
    ok(records == N - CAP, "cap: one 'too many connections' record per refusal (%d of %d lines)",
       records, lines);
    cur = &main_med;
}

/* ---------------------------------------------------------------- denial records */

static bool has_record(json_t *arr, const char *proto, const char *target, const char *reason)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        const char *p = json_string_value(json_object_get(o, "protocol"));
        const char *t = json_string_value(json_object_get(o, "target"));
        const char *r = json_string_value(json_object_get(o, "reason"));
        if (p && t && r && (!proto || strcmp(p, proto) == 0) && (!target || strcmp(t, target) == 0) &&
            strcmp(r, reason) == 0)
            return true;
    }
    return false;
}

static void test_denials(void)
{
    FILE *f = fopen(main_med.denials, "re");
    ok(f != NULL, "denials: file readable");
    if (!f)
        return;
    json_t *arr = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int lines = 0, good = 0;
    bool leak = false;
    while ((n = getline(&line, &cap, f)) > 0) {
        lines++;
        if (strstr(line, "hunter2") || strstr(line, "c2VjcmV0") || strstr(line, "Bearer"))
            leak = true;
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *dec = json_string_value(json_object_get(o, "decision"));
        const char *proto = json_string_value(json_object_get(o, "protocol"));
        if (o && json_is_object(o) && line[n - 1] == '\n' && kind && strcmp(kind, "network") == 0 &&
            dec && strcmp(dec, "deny") == 0 && proto &&
            (strcmp(proto, "http-connect") == 0 || strcmp(proto, "http") == 0 ||
             strcmp(proto, "socks5") == 0) &&
            json_is_string(json_object_get(o, "target")) &&
            json_is_string(json_object_get(o, "reason")) && json_object_size(o) == 5)
            good++;
        if (o)
            json_array_append_new(arr, o);
    }
    free(line);
    fclose(f);
    ok(lines > 40 && good == lines, "denials: %d lines, all one JSON object each with the schema",
       lines);
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
    mediator *all[2] = {&main_med, &cap_med};
    for (int i = 0; i < 2; i++) {
        if (all[i]->pid > 0) {
            kill(all[i]->pid, SIGKILL);
            waitpid(all[i]->pid, NULL, 0);
        }
        if (all[i]->sock[0])
            unlink(all[i]->sock);
        if (all[i]->denials[0])
            unlink(all[i]->denials);
    }
    rmdir(root);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_grant_parse();
    test_grants_allow();
    test_addr_internal();
    test_http_parse();
    test_socks_parse();

    a3s_mediator_opts bad = {0, 0, 0, false};
    ok(a3s_mediator_serve(-1, 0, NULL, 0, -1, &bad) == -1, "serve: invalid listen fd -> -1");

    snprintf(root, sizeof root, "/tmp/a3s-mediator-test-XXXXXX");
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(main_med.sock, sizeof main_med.sock, "%s/m.sock", root);
    snprintf(main_med.denials, sizeof main_med.denials, "%s/denials.jsonl", root);
    snprintf(cap_med.sock, sizeof cap_med.sock, "%s/cap.sock", root);
    snprintf(cap_med.denials, sizeof cap_med.denials, "%s/cap.jsonl", root);
    atexit(cleanup);

    /* Upstreams: one answering, one whose accept queue is full, one bound but closed. */
    up_listen = tcp_socket_on_loopback(&up_port, 64);
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
    while (other_port == up_port || other_port == black_port || other_port == closed_port);

    char g0[32], g1[32], g2[32];
    snprintf(g0, sizeof g0, "127.0.0.1:%d", up_port);
    snprintf(g1, sizeof g1, "127.0.0.1:%d", black_port);
    snprintf(g2, sizeof g2, "127.0.0.1:%d", closed_port);
    const char *grants[] = {g0, "localhost", g1, g2};
    a3s_mediator_opts o = {.connect_timeout_ms = 1000, .idle_timeout_ms = 3000, .max_connections = 128};
    start_mediator(&main_med, grants, 4, &o);
    a3s_mediator_opts co = {.connect_timeout_ms = 1000, .idle_timeout_ms = 30000,
                            .max_connections = 0 /* the default, 128 */};
    start_mediator(&cap_med, grants, 1, &co);
    pthread_t up;
    if (pthread_create(&up, NULL, up_main, NULL) != 0) {
        fprintf(stderr, "upstream thread\n");
        return 2;
    }
    sleep_ms(100);
    int fds0 = count_fds(main_med.pid);

    test_live_connect();
    test_live_absolute();
    test_live_malformed();
    test_live_socks();
    test_live_idle();
    test_live_cap();

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
    ok(w == main_med.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 && dt < 2000,
       "stop: serve returns 0 promptly once stop_fd hangs up (%llu ms)", dt);
    main_med.pid = -1;

    test_denials();
    close(black);
    close(closed);
    close(filler[0]);
    close(filler[1]);
    return tap_done();
}
