/* The mediator's request parsers (mediator_parse.h). They never read past len, refuse as
 * soon as the bytes seen so far cannot become an acceptable request, and check the origin
 * with the grant's own host and authority rules, so that what a grant names is what the
 * upstream is asked for. */
#include "mediator_parse.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ------------------------------------------------------------------ HTTP parsing */

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
        return A3S_HP_BAD;
    for (size_t j = 0; j < m; j++) {
        unsigned char c = (unsigned char)b[j];
        if (c == '\r' && j + 1 == m)
            continue; /* the LF may still come */
        if (c < 0x20 || c >= 0x7f)
            return A3S_HP_BAD;
    }
    return A3S_HP_MORE;
}

static int request_line(const char *line, size_t ll, a3s_http_req *r)
{
    const char *sp1 = memchr(line, ' ', ll);
    if (!sp1)
        return A3S_HP_BAD;
    const char *m = method_find(line, (size_t)(sp1 - line));
    if (!m)
        return A3S_HP_BAD;
    snprintf(r->method, sizeof r->method, "%s", m);
    const char *t = sp1 + 1;
    const char *sp2 = memchr(t, ' ', ll - (size_t)(t - line));
    if (!sp2 || sp2 == t)
        return A3S_HP_BAD;
    size_t tlen = (size_t)(sp2 - t);
    const char *v = sp2 + 1;
    size_t vlen = ll - (size_t)(v - line);
    if (vlen != 8 || (memcmp(v, "HTTP/1.1", 8) != 0 && memcmp(v, "HTTP/1.0", 8) != 0))
        return A3S_HP_BAD; /* also refuses extra tokens: they would contain a space */
    if (strcmp(m, "CONNECT") == 0) {
        if (a3s_grant_authority_parse(t, tlen, r->host, &r->port) || r->port == 0)
            return A3S_HP_BAD;
        r->connect = true;
        return A3S_HP_OK;
    }
    if (tlen >= 8 && a3s_ascii_ncase_eq(t, "https://", 8))
        return A3S_HP_TLS; /* no TLS interception: HTTPS goes through CONNECT */
    if (tlen < 7 || !a3s_ascii_ncase_eq(t, "http://", 7))
        return A3S_HP_BAD;
    const char *a = t + 7;
    const char *slash = memchr(a, '/', tlen - 7);
    if (!slash)
        return A3S_HP_BAD;
    if (a3s_grant_authority_parse(a, (size_t)(slash - a), r->host, &r->port))
        return A3S_HP_BAD;
    if (r->port == 0)
        r->port = 80;
    size_t plen = (size_t)(t + tlen - slash);
    if (plen >= sizeof r->path || !path_ok(slash, plen))
        return A3S_HP_BAD;
    memcpy(r->path, slash, plen);
    r->path[plen] = '\0';
    return A3S_HP_OK;
}

static int header_line(const char *h, size_t hl, bool *have_cl, uint64_t *cl)
{
    const char *colon = memchr(h, ':', hl);
    if (!colon || colon == h)
        return A3S_HP_BAD; /* also refuses obs-fold continuation lines */
    size_t nl = (size_t)(colon - h);
    for (size_t i = 0; i < nl; i++)
        if (!is_tchar((unsigned char)h[i]))
            return A3S_HP_BAD; /* "Name :" is a smuggling classic */
    for (size_t i = nl + 1; i < hl; i++) {
        unsigned char c = (unsigned char)h[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return A3S_HP_BAD;
    }
    if (nl == 17 && a3s_ascii_ncase_eq(h, "transfer-encoding", 17))
        return A3S_HP_CHUNKED;
    if (nl == 14 && a3s_ascii_ncase_eq(h, "content-length", 14)) {
        const char *v = colon + 1, *e = h + hl;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (*have_cl || e == v || e - v > 18)
            return A3S_HP_BAD;
        uint64_t val = 0; /* at most 18 digits: no overflow */
        for (const char *p = v; p < e; p++) {
            if (!is_digit((unsigned char)*p))
                return A3S_HP_BAD;
            val = val * 10 + (uint64_t)(*p - '0');
        }
        *have_cl = true;
        *cl = val;
    }
    return A3S_HP_OK;
}

int a3s_http_head_parse(const char *buf, size_t len, a3s_http_req *r)
{
    memset(r, 0, sizeof *r);
    size_t scan = len < A3S_HTTP_LINE_MAX ? len : A3S_HTTP_LINE_MAX;
    const char *lf = scan ? memchr(buf, '\n', scan) : NULL;
    if (!lf) {
        if (line_prefix(buf, scan) == A3S_HP_BAD)
            return A3S_HP_BAD;
        return len >= A3S_HTTP_LINE_MAX ? A3S_HP_TOOBIG : A3S_HP_MORE;
    }
    size_t le = (size_t)(lf - buf); /* index of the LF */
    if (le == 0 || buf[le - 1] != '\r' || line_prefix(buf, le) == A3S_HP_BAD)
        return A3S_HP_BAD;
    int rc = request_line(buf, le - 1, r);
    if (rc != A3S_HP_OK)
        return rc;
    size_t start = le + 1, pos = start;
    bool have_cl = false;
    for (;;) {
        size_t room = start + A3S_HTTP_HEADERS_MAX - pos;
        size_t avail = len - pos;
        const char *nl = memchr(buf + pos, '\n', avail < room ? avail : room);
        if (!nl)
            return avail >= room ? A3S_HP_TOOBIG : A3S_HP_MORE;
        size_t e = (size_t)(nl - buf);
        if (e == pos || buf[e - 1] != '\r')
            return A3S_HP_BAD; /* bare LF */
        size_t hl = e - 1 - pos;
        if (hl == 0) {
            r->head_len = e + 1;
            return A3S_HP_OK;
        }
        rc = header_line(buf + pos, hl, &have_cl, &r->content_length);
        if (rc != A3S_HP_OK)
            return rc;
        pos = e + 1;
    }
}

int a3s_http_parse(const char *buf, size_t len, a3s_http_req *r)
{
    if (!r || (!buf && len))
        return -1;
    int rc = a3s_http_head_parse(buf ? buf : "", len, r);
    return rc > 0 ? 1 : rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ SOCKS5 parsing */

int a3s_socks_greeting(const unsigned char *b, size_t len, size_t *used)
{
    if (len < 1)
        return A3S_SP_MORE;
    if (b[0] != 5)
        return A3S_SP_BAD;
    if (len < 2)
        return A3S_SP_MORE;
    size_t n = b[1];
    if (n == 0)
        return A3S_SP_NOAUTH;
    if (len < 2 + n)
        return A3S_SP_MORE;
    if (!memchr(b + 2, 0x00, n))
        return A3S_SP_NOAUTH;
    *used = 2 + n;
    return A3S_SP_OK;
}

int a3s_socks_request(const unsigned char *b, size_t len, a3s_socks_req *r, size_t *used)
{
    memset(r, 0, sizeof *r);
    if (len < 4)
        return (len >= 1 && b[0] != 5) || (len >= 3 && b[2] != 0) ? A3S_SP_BAD : A3S_SP_MORE;
    if (b[0] != 5 || b[2] != 0)
        return A3S_SP_BAD;
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
            return A3S_SP_MORE;
        alen = b[4];
        off = 5;
        if (alen == 0)
            return A3S_SP_BAD;
        break;
    default:
        return A3S_SP_ATYP;
    }
    if (len < off + alen + 2)
        return A3S_SP_MORE;
    if (b[3] == 1 || b[3] == 4) {
        if (!inet_ntop(b[3] == 1 ? AF_INET : AF_INET6, b + off, r->host, sizeof r->host))
            return A3S_SP_BAD;
    } else if (a3s_grant_host_check((const char *)b + off, alen, r->host)) {
        return A3S_SP_BAD;
    }
    r->port = (b[off + alen] << 8) | b[off + alen + 1];
    if (r->port == 0)
        return A3S_SP_BAD;
    r->cmd = b[1];
    *used = off + alen + 2;
    return A3S_SP_OK;
}

int a3s_socks_parse(const unsigned char *buf, size_t len, a3s_socks_req *r, size_t *used)
{
    if (!r || !used || (!buf && len))
        return -1;
    static const unsigned char none[1];
    if (!buf)
        buf = none;
    size_t g = 0, q = 0;
    int rc = a3s_socks_greeting(buf, len, &g);
    if (rc == A3S_SP_OK)
        rc = a3s_socks_request(buf + g, len - g, r, &q);
    if (rc == A3S_SP_OK)
        *used = g + q;
    return rc > 0 ? 1 : rc == 0 ? 0 : -1;
}

/* ------------------------------------------------------------------ the forwarded head */

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
