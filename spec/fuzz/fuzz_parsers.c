/* libFuzzer harness for the mediator's parsers (relay/mediator_parse.c): a3s_http_parse
 * (and the head it forwards, a3s_http_forward_head), a3s_socks_parse, on short inputs
 * a3s_grant_parse (engine/grant.c), and the address policy on raw addresses
 * (relay/mediator_addr.c). Besides the sanitizers it checks what the server relies on: a
 * complete parse stays inside the input and the bounds, the host is validated lower-case
 * text, the port is 1..65535, paths carry no dot segments or escaped dots/slashes, a
 * complete head is complete exactly at head_len (no shorter prefix completes),
 * content_length is the request's own Content-Length, the forwarded head keeps exactly that
 * framing and ends the connection, grants never name an unspecified address, and the
 * IPv4-mapped form of an address is judged as the address.
 * Build: spec/CMakeLists.txt (clang only); scripts/test.sh runs it for
 * A3S_FUZZ_SECONDS (default 60) on a copy of spec/fuzz/corpus; by hand e.g.
 *   fuzz_parsers -runs=200000 -artifact_prefix=/tmp/ "$(mktemp -d)" spec/fuzz/corpus */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grant.h"
#include "mediator_addr.h"
#include "mediator_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool cond)
{
    if (!cond)
        abort();
}

/* What every parsed host must look like: a lower-case name, IPv4 or canonical IPv6. */
static bool host_sane(const char *h)
{
    size_t n = strnlen(h, A3S_GRANT_HOST_MAX + 1);
    if (n == 0 || n > A3S_GRANT_HOST_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
              c == ':'))
            return false;
    }
    return true;
}

static bool path_sane(const char *p)
{
    if (p[0] != '/')
        return false;
    size_t q = strcspn(p, "?");
    for (size_t i = 0; i < q; i++) {
        if (p[i] == '\\' || p[i] == '#')
            return false;
        if (p[i] == '/' && p[i + 1] == '.' &&
            (p[i + 2] == '/' || p[i + 2] == '?' || p[i + 2] == '\0' ||
             (p[i + 2] == '.' && (p[i + 3] == '/' || p[i + 3] == '?' || p[i + 3] == '\0'))))
            return false;
        if (p[i] == '%' && i + 2 < q) {
            char a = p[i + 1], b = (char)(p[i + 2] | 0x20);
            if ((a == '2' && (b == 'e' || b == 'f')) || (a == '5' && b == 'c'))
                return false;
        }
    }
    return true;
}

static char lower(char c)
{
    return (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
}

static bool starts_ci(const char *s, size_t n, const char *prefix)
{
    size_t k = strlen(prefix);
    if (n < k)
        return false;
    for (size_t i = 0; i < k; i++)
        if (lower(s[i]) != prefix[i])
            return false;
    return true;
}

/* Header lines named `name:` in head[0..n) (after the first line), and the digits of the
 * last one's value in *value. Written independently of the parser. */
static int header_count(const char *head, size_t n, const char *name, uint64_t *value)
{
    int k = 0;
    const char *end = head + n;
    const char *line = memchr(head, '\n', n);
    while (line && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        size_t len = eol ? (size_t)(eol - line) : (size_t)(end - line);
        if (starts_ci(line, len, name)) {
            k++;
            uint64_t v = 0;
            for (const char *p = line + strlen(name); p < line + len; p++)
                if (*p >= '0' && *p <= '9')
                    v = v * 10 + (uint64_t)(*p - '0');
            if (value)
                *value = v;
        }
        line = eol;
    }
    return k;
}

/* What goes upstream: origin form, exactly the client's framing, one Connection: close. */
static void check_forward(const uint8_t *data, const a3s_http_req *r)
{
    size_t len = 0;
    char *h = a3s_http_forward_head((const char *)data, r, &len);
    if (!h)
        return;
    char start[4200];
    int sn = snprintf(start, sizeof start, "%s %s HTTP/1.1\r\nHost: ", r->method, r->path);
    check(sn > 0 && len > (size_t)sn && memcmp(h, start, (size_t)sn) == 0);
    check(len >= 21 && memcmp(h + len - 21, "Connection: close\r\n\r\n", 21) == 0);
    check(memmem(h, len, "\r\n\r\n", 4) == h + len - 4); /* one head, no injected end */
    check(!memchr(h, '\0', len) && h[len] == '\0');
    uint64_t orig = 0, fwd = 0;
    int in_cl = header_count((const char *)data, r->head_len, "content-length:", &orig);
    int out_cl = header_count(h, len, "content-length:", &fwd);
    check(in_cl <= 1 && out_cl == in_cl && fwd == orig && r->content_length == orig);
    check(header_count(h, len, "connection:", NULL) == 1);
    check(header_count(h, len, "transfer-encoding:", NULL) == 0);
    check(header_count(h, len, "host:", NULL) == 1);
    free(h);
}

static void fuzz_http(const uint8_t *data, size_t size)
{
    a3s_http_req r;
    int rc = a3s_http_parse((const char *)data, size, &r);
    check(rc >= -1 && rc <= 1);
    if (rc == 0)
        check(size < 8192 + 16384); /* "need more" never past the bounds */
    if (rc != 1)
        return;
    check(r.head_len >= 4 && r.head_len <= size && r.head_len <= 8192 + 16384);
    check(memcmp(data + r.head_len - 4, "\r\n\r\n", 4) == 0);
    check(host_sane(r.host) && r.port >= 1 && r.port <= 65535);
    check(strnlen(r.method, sizeof r.method) < sizeof r.method);
    if (r.connect)
        check(strcmp(r.method, "CONNECT") == 0);
    else
        check(strnlen(r.path, sizeof r.path) < sizeof r.path && path_sane(r.path));
    uint64_t cl = 0;
    int ncl = header_count((const char *)data, r.head_len, "content-length:", &cl);
    check(ncl <= 1 && r.content_length == (ncl ? cl : 0));
    check(header_count((const char *)data, r.head_len, "transfer-encoding:", NULL) == 0);
    if (!r.connect)
        check_forward(data, &r);
    a3s_http_req again;
    check(a3s_http_parse((const char *)data, r.head_len, &again) == 1);
    check(again.head_len == r.head_len && again.port == r.port && again.connect == r.connect &&
          strcmp(again.host, r.host) == 0 && strcmp(again.path, r.path) == 0);
    check(a3s_http_parse((const char *)data, r.head_len - 1, &again) == 0);
}

static void fuzz_socks(const uint8_t *data, size_t size)
{
    a3s_socks_req s;
    size_t used = 0;
    int rc = a3s_socks_parse(data, size, &s, &used);
    check(rc >= -1 && rc <= 1);
    if (rc != 1)
        return;
    check(used >= 10 && used <= size);
    check(host_sane(s.host) && s.port >= 1 && s.port <= 65535 && s.cmd >= 0 && s.cmd <= 255);
    a3s_socks_req again;
    size_t used2 = 0;
    check(a3s_socks_parse(data, used, &again, &used2) == 1 && used2 == used &&
          strcmp(again.host, s.host) == 0 && again.port == s.port);
    check(a3s_socks_parse(data, used - 1, &again, &used2) == 0);
}

static void fuzz_grant(const uint8_t *data, size_t size)
{
    if (size > 512)
        return;
    char *z = malloc(size + 1);
    if (!z)
        return;
    memcpy(z, data, size);
    z[size] = '\0';
    a3s_grant g;
    if (a3s_grant_parse(z, &g, NULL) == 0) {
        check(host_sane(g.host) && g.port >= 0 && g.port <= 65535);
        struct sockaddr_in6 s6;
        struct sockaddr_in s4;
        memset(&s6, 0, sizeof s6);
        memset(&s4, 0, sizeof s4);
        s6.sin6_family = AF_INET6;
        s4.sin_family = AF_INET;
        if (inet_pton(AF_INET6, g.host, &s6.sin6_addr) == 1)
            check(!a3s_addr_is_unspecified((struct sockaddr *)&s6));
        if (inet_pton(AF_INET, g.host, &s4.sin_addr) == 1)
            check(!a3s_addr_is_unspecified((struct sockaddr *)&s4));
        check(a3s_grants_allow(&g, 1, g.host, g.port ? g.port : 443));
        check(!strchr(z, '*') && !strchr(z, '@') && !strchr(z, '/') && !strchr(z, ' '));
    }
    free(z);
}

/* The first 16 bytes as an IPv6 address and, when mapped, as the IPv4 one it carries:
 * both forms get the same answers; unspecified is always internal too. */
static void fuzz_addr(const uint8_t *data, size_t size)
{
    if (size < 16)
        return;
    struct sockaddr_in6 s6;
    memset(&s6, 0, sizeof s6);
    s6.sin6_family = AF_INET6;
    memcpy(&s6.sin6_addr, data, 16);
    struct sockaddr_in s4;
    memset(&s4, 0, sizeof s4);
    s4.sin_family = AF_INET;
    memcpy(&s4.sin_addr, data + 12, 4);
    const struct sockaddr *a6 = (const struct sockaddr *)&s6, *a4 = (const struct sockaddr *)&s4;
    bool u6 = a3s_addr_is_unspecified(a6), i6 = a3s_addr_is_internal(a6);
    bool u4 = a3s_addr_is_unspecified(a4), i4 = a3s_addr_is_internal(a4);
    check(!u6 || i6);
    check(!u4 || i4);
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(data, mapped, 12) == 0)
        check(u6 == u4 && i6 == i4);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_http(data, size);
    fuzz_socks(data, size);
    fuzz_grant(data, size);
    fuzz_addr(data, size);
    return 0;
}
