/* Unit tests of the mediator's request parsers (relay/mediator_parse.c): HTTP requests
 * (CONNECT, absolute form, heads to forward) and SOCKS5. Pure: no socket is opened. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mediator_cases.h"
#include "mediator_parse.h"
#include "tap.h"

/* ---------------------------------------------------------------- pure: parsers */

static int parse_str(const char *s, a3s_http_req *r)
{
    return a3s_http_parse(s, strlen(s), r);
}

static void test_http_parse(void)
{
    a3s_http_req r;
    char buf[512];
    for (size_t i = 0; i < sizeof bad_connect_corpus / sizeof *bad_connect_corpus; i++) {
        snprintf(buf, sizeof buf, "%s\r\n\r\n", bad_connect_corpus[i]);
        ok(parse_str(buf, &r) == -1, "http parse: malformed CONNECT refused: '%s'", bad_connect_corpus[i]);
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
    ok(parse_str("POST http://a.example/x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc", &r) == 1 &&
           r.content_length == 3,
       "http parse: POST with Content-Length");
    ok(parse_str("POST http://a.example/x HTTP/1.1\r\ncontent-length:  123456789012345678 \r\n\r\n",
                 &r) == 1 &&
           r.content_length == 123456789012345678ULL,
       "http parse: 18-digit Content-Length, any case, OWS");
    ok(parse_str("GET http://a.example/x HTTP/1.1\r\n\r\nxyz", &r) == 1 && r.content_length == 0,
       "http parse: no Content-Length -> no body");
    s = "POST http://a.example:8080/x?y HTTP/1.1\r\nHost: evil\r\nConnection: Content-Length, "
        "x-a, close\r\nX-A: 1\r\nContent-Length: 4\r\nTE: trailers\r\nProxy-X: y\r\n"
        "Accept: */*\r\n\r\nbody";
    size_t fl = 0;
    char *fh = parse_str(s, &r) == 1 ? a3s_http_forward_head(s, &r, &fl) : NULL;
    ok_streq(fh,
             "POST /x?y HTTP/1.1\r\nHost: a.example:8080\r\nContent-Length: 4\r\n"
             "Accept: */*\r\nConnection: close\r\n\r\n",
             "forward head: origin form, our Host, Content-Length kept though named by "
             "Connection, hop-by-hop and named headers dropped, Connection: close");
    ok(fh && fl == strlen(fh), "forward head: length as returned");
    free(fh);
    ok(parse_str("CONNECT a.example:443 HTTP/1.1\r\n\r\n", &r) == 1 &&
           a3s_http_forward_head("CONNECT a.example:443 HTTP/1.1\r\n\r\n", &r, &fl) == NULL,
       "forward head: none for CONNECT");

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

int main(void)
{
    test_http_parse();
    test_socks_parse();
    return tap_done();
}
