/* Network grants (grant.h): parsing and normalizing them, host and authority validation,
 * and matching a request's origin against them. */
#include "grant.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "util.h"

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

/* ASCII-only, so the locale can never change what matches. */
bool a3s_ascii_ncase_eq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (to_lower((unsigned char)a[i]) != to_lower((unsigned char)b[i]))
            return false;
    return true;
}

static bool case_eq(const char *a, const char *b)
{
    size_t n = strlen(a);
    return n == strlen(b) && a3s_ascii_ncase_eq(a, b, n);
}

/* ------------------------------------------------------------------ hosts and grants */

/* Validate s[0..n) as a host and write it lower-cased (IPv6 canonical) to out, which
 * holds A3S_GRANT_HOST_MAX + 1 bytes. A ':' means an IPv6 literal. Returns NULL or why. */
const char *a3s_grant_host_check(const char *s, size_t n, char *out)
{
    if (n == 0)
        return "empty host";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            return "control byte in host";
        if (c == '*' || c == '?')
            return "wildcards are not allowed";
        if (c == ' ')
            return "spaces are not allowed";
        if (c == '/' || c == '\\')
            return "slashes are not allowed";
        if (c == '@')
            return "user info is not allowed";
    }
    if (memchr(s, ':', n)) {
        char tmp[INET6_ADDRSTRLEN];
        struct in6_addr a;
        if (n >= sizeof tmp)
            return "invalid IPv6 literal";
        memcpy(tmp, s, n);
        tmp[n] = '\0';
        if (inet_pton(AF_INET6, tmp, &a) != 1 ||
            !inet_ntop(AF_INET6, &a, out, A3S_GRANT_HOST_MAX + 1))
            return "invalid IPv6 literal";
        return NULL;
    }
    if (n > A3S_GRANT_HOST_MAX)
        return "host name too long";
    bool numeric = true;
    size_t label = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0)
                return "empty label in host name";
            if (s[i - 1] == '-')
                return "a label of a host name may not end with '-'";
            label = 0;
        } else {
            if (!is_alpha(c) && !is_digit(c) && c != '-')
                return "invalid character in host name";
            /* RFC 1123; and a host read as an option ("-oProxyCommand=...") by a tool
             * it may be handed to is never a grant. */
            if (c == '-' && label == 0)
                return "a label of a host name may not start with '-'";
            if (!is_digit(c))
                numeric = false;
            if (++label > 63)
                return "label longer than 63 bytes";
        }
        out[i] = (char)to_lower(c);
    }
    if (label == 0)
        return "empty label in host name";
    if (s[n - 1] == '-')
        return "a label of a host name may not end with '-'";
    out[n] = '\0';
    /* All digits and dots: only a canonical dotted quad, never "127.1" or "2130706433"
     * (the resolver would read those as addresses). */
    struct in_addr a4;
    if (numeric && inet_pton(AF_INET, out, &a4) != 1)
        return "invalid IPv4 literal";
    return NULL;
}

static int port_parse(const char *s, size_t n)
{
    if (n == 0 || n > 5)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_digit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return (v >= 1 && v <= 65535) ? v : -1;
}

/* "host", "host:port", "[v6]" or "[v6]:port" -> host (canonical) and *port (0 when
 * absent). Returns NULL or why. */
const char *a3s_grant_authority_parse(const char *s, size_t n, char *host, int *port)
{
    const char *hs = s, *ps = NULL;
    size_t hn = n, pn = 0;
    if (n > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return "unbalanced '['";
        hs = s + 1;
        hn = (size_t)(rb - hs);
        if (hn == 0)
            return "empty host";
        if (!memchr(hs, ':', hn))
            return "brackets are only for IPv6 literals";
        size_t rest = n - (size_t)(rb + 1 - s);
        if (rest > 0) {
            if (rb[1] != ':')
                return "junk after ']'";
            ps = rb + 2;
            pn = rest - 1;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        if (colon) {
            if (memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
                return "IPv6 literals need brackets";
            hn = (size_t)(colon - s);
            ps = colon + 1;
            pn = n - hn - 1;
        }
    }
    const char *why = a3s_grant_host_check(hs, hn, host);
    if (why)
        return why;
    *port = 0;
    if (ps) {
        int p = port_parse(ps, pn);
        if (p < 0)
            return "port outside 1..65535";
        *port = p;
    }
    return NULL;
}

/* An IP literal as a socket address (port 0); false for names. */
bool a3s_addr_literal(const char *host, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in = (struct sockaddr_in *)(void *)ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)(void *)ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        return true;
    }
    return false;
}

static bool literal_unspecified(const char *host)
{
    struct sockaddr_storage ss;
    return a3s_addr_literal(host, &ss) && a3s_addr_is_unspecified((const struct sockaddr *)&ss);
}

int a3s_grant_parse(const char *spec, a3s_grant *g, a3s_error *err)
{
    if (!spec || !g)
        return a3s_fail(err, A3S_ERR_INVALID, "invalid network grant: none given");
    size_t n = strnlen(spec, 1024);
    /* The spec is echoed in the message: show it printable and short. */
    char shown[96];
    size_t k = 0;
    for (; k < n && k < sizeof shown - 4; k++) {
        unsigned char c = (unsigned char)spec[k];
        shown[k] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
    }
    if (k < n)
        memcpy(shown + k, "...", 3), k += 3;
    shown[k] = '\0';
    if (n >= 1024)
        return a3s_fail(err, A3S_ERR_INVALID, "invalid network grant '%s': too long", shown);
    a3s_grant tmp;
    memset(&tmp, 0, sizeof tmp);
    const char *why = a3s_grant_authority_parse(spec, n, tmp.host, &tmp.port);
    if (!why && literal_unspecified(tmp.host))
        why = "the unspecified address reaches the host itself";
    if (why)
        return a3s_fail(err, A3S_ERR_INVALID, "invalid network grant '%s': %s", shown, why);
    *g = tmp;
    return 0;
}

bool a3s_grants_allow(const a3s_grant *g, size_t n, const char *host, int port)
{
    if (!g || !host || !*host || port < 1 || port > 65535)
        return false;
    for (size_t i = 0; i < n; i++)
        if (case_eq(g[i].host, host) && (g[i].port == 0 || g[i].port == port))
            return true;
    return false;
}

/* ------------------------------------------------------------------ addresses */

static const unsigned char v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool a3s_addr_is_unspecified(const struct sockaddr *sa)
{
    if (!sa)
        return true;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        unsigned char b[4];
        memcpy(b, &in->sin_addr, 4);
        return b[0] == 0; /* 0.0.0.0/8: "this network"; 0.0.0.0 connects to loopback */
    }
    if (sa->sa_family != AF_INET6)
        return true;
    const unsigned char *b = ((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr.s6_addr;
    static const unsigned char zero[16];
    if (memcmp(b, zero, 16) == 0)
        return true;
    return memcmp(b, v4_mapped_prefix, 12) == 0 && b[12] == 0; /* connects as IPv4 */
}
