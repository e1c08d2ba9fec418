/* libFuzzer harness for the mediator's parsers (engine/mediator.c): a3s_http_parse,
 * a3s_socks_parse and, on short inputs, a3s_grant_parse. Besides the sanitizers it checks
 * what the server relies on: a complete parse stays inside the input and the bounds, the
 * host is validated lower-case text, the port is 1..65535, paths carry no dot segments or
 * escaped dots/slashes, and a complete head is complete exactly at head_len (no shorter
 * prefix completes). Build: spec/CMakeLists.txt (clang only); run e.g.
 *   fuzz_parsers -runs=200000 spec/fuzz/corpus */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mediator.h"

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
        check(a3s_grants_allow(&g, 1, g.host, g.port ? g.port : 443));
        check(!strchr(z, '*') && !strchr(z, '@') && !strchr(z, '/') && !strchr(z, ' '));
    }
    free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_http(data, size);
    fuzz_socks(data, size);
    fuzz_grant(data, size);
    return 0;
}
