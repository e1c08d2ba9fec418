/* The mediator's request parsers: HTTP request heads (CONNECT and absolute-form plain
 * HTTP), the head forwarded upstream, and SOCKS5 greeting + request. Every read they see
 * is bounded (the head buffer never grows), and they validate the origin the way grants
 * are validated (grant.h). Exposed for the server, the tests and the fuzz harness. */
#ifndef A3S_MEDIATOR_PARSE_H
#define A3S_MEDIATOR_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grant.h"

#define A3S_HTTP_LINE_MAX 8192     /* request line, CRLF included */
#define A3S_HTTP_HEADERS_MAX 16384 /* header lines and the final CRLF */
#define A3S_HTTP_HEAD_MAX (A3S_HTTP_LINE_MAX + A3S_HTTP_HEADERS_MAX)

typedef struct a3s_http_req {
    char method[16];
    char host[A3S_GRANT_HOST_MAX + 1];
    int port;
    char path[4096]; /* origin-form path for absolute-form requests, normalized */
    bool connect;    /* CONNECT host:port */
    size_t head_len; /* bytes of request line + headers, including the final CRLFCRLF */
    uint64_t content_length; /* the body that belongs to this request (0: none) */
} a3s_http_req;

/* Parse an HTTP request head in buf[0..len): 1 complete and valid (r filled), 0 need more
 * bytes, -1 malformed or refused (overlong request line > 8 KiB, headers > 16 KiB, a
 * method outside CONNECT/GET/HEAD/POST/PUT/PATCH/DELETE/OPTIONS, a target that is not
 * "host:port" for CONNECT or "http://host[:port]/path" otherwise, chunked bodies, dot
 * segments or percent-encoded dots/slashes in the path). */
int a3s_http_parse(const char *buf, size_t len, a3s_http_req *r);

/* What a3s_http_head_parse tells apart among the refusals, for the server's answers. */
enum {
    A3S_HP_MORE = 0,
    A3S_HP_OK = 1,
    A3S_HP_BAD = -1,
    A3S_HP_TOOBIG = -2,
    A3S_HP_TLS = -3,
    A3S_HP_CHUNKED = -4,
};

/* a3s_http_parse with the reason of a refusal (A3S_HP_*); buf non-NULL. */
int a3s_http_head_parse(const char *buf, size_t len, a3s_http_req *r);

/* The head sent upstream for an absolute-form request that a3s_http_parse accepted from
 * buf into r: origin-form request line, our own Host, the client's end-to-end headers
 * (Content-Length always kept, whatever Connection names), then "Connection: close".
 * malloc'd and NUL-terminated, length in *len; NULL for CONNECT or on ENOMEM. */
char *a3s_http_forward_head(const char *buf, const a3s_http_req *r, size_t *len);

typedef struct a3s_socks_req {
    char host[A3S_GRANT_HOST_MAX + 1];
    int port;
    int cmd; /* 1 CONNECT; anything else is refused with reply 0x07 */
} a3s_socks_req;

/* Parse a SOCKS5 greeting + request in buf[0..len): 1 complete (r filled, *used = bytes
 * consumed), 0 need more, -1 malformed. Only "no authentication" is acceptable. */
int a3s_socks_parse(const unsigned char *buf, size_t len, a3s_socks_req *r, size_t *used);

/* The two steps of a3s_socks_parse on their own, for the server, which answers the
 * greeting before the request comes: A3S_SP_OK with *used, A3S_SP_MORE, or why not. */
enum {
    A3S_SP_MORE = 0,
    A3S_SP_OK = 1,
    A3S_SP_BAD = -1,
    A3S_SP_NOAUTH = -2,
    A3S_SP_ATYP = -3,
};
int a3s_socks_greeting(const unsigned char *b, size_t len, size_t *used);
int a3s_socks_request(const unsigned char *b, size_t len, a3s_socks_req *r, size_t *used);

#endif
