/* The host-side network mediator for grants (SPEC §6): it listens on a Unix socket that
 * only the in-sandbox relay reaches, speaks HTTP CONNECT, absolute-form plain HTTP and
 * SOCKS5 (told apart by the first byte: 0x05 is SOCKS), decides each request against the
 * grants BEFORE any upstream byte, and only then connects and relays bytes. */
#ifndef A3S_MEDIATOR_H
#define A3S_MEDIATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/socket.h>

#include "a3s_sandbox.h"

#define A3S_GRANT_HOST_MAX 253

/* One exact origin: a DNS name (case-insensitive, no wildcards) or an IP literal
 * (IPv6 without brackets); port 0 means any port. */
typedef struct a3s_grant {
    char host[A3S_GRANT_HOST_MAX + 1];
    int port;
} a3s_grant;

/* Parse "HOST", "HOST:PORT", "[V6]" or "[V6]:PORT" into g (host lower-cased, brackets
 * dropped). Refuses empty hosts, wildcards ('*'), spaces, '/', '\\', '@', control bytes,
 * labels outside [A-Za-z0-9-] (except IP literals), ports outside 1..65535, and anything
 * longer than A3S_GRANT_HOST_MAX: A3S_ERR_INVALID naming the spec. */
int a3s_grant_parse(const char *spec, a3s_grant *g, a3s_error *err);

/* true when a request for host:port is covered by one of the grants: exact host
 * (case-insensitive; "localhost" and "127.0.0.1" are different hosts), and the grant's
 * port when it has one. */
bool a3s_grants_allow(const a3s_grant *g, size_t n, const char *host, int port);

/* Address policy after resolution: loopback, private (RFC 1918, fc00::/7), link-local
 * (169.254/16, fe80::/10), unspecified, multicast, CGNAT (100.64/10) and metadata
 * (169.254.169.254, fd00:ec2::254) addresses are refused unless the grant names that
 * exact IP literally. */
bool a3s_addr_is_internal(const struct sockaddr *sa);

/* Request parsing, exposed for tests and the fuzz harness. */
typedef struct a3s_http_req {
    char method[16];
    char host[A3S_GRANT_HOST_MAX + 1];
    int port;
    char path[4096]; /* origin-form path for absolute-form requests, normalized */
    bool connect;    /* CONNECT host:port */
    size_t head_len; /* bytes of request line + headers, including the final CRLFCRLF */
} a3s_http_req;

/* Parse an HTTP request head in buf[0..len): 1 complete and valid (r filled), 0 need more
 * bytes, -1 malformed or refused (overlong request line > 8 KiB, headers > 16 KiB, a
 * method outside CONNECT/GET/HEAD/POST/PUT/PATCH/DELETE/OPTIONS, a target that is not
 * "host:port" for CONNECT or "http://host[:port]/path" otherwise, chunked bodies, dot
 * segments or percent-encoded dots/slashes in the path). */
int a3s_http_parse(const char *buf, size_t len, a3s_http_req *r);

typedef struct a3s_socks_req {
    char host[A3S_GRANT_HOST_MAX + 1];
    int port;
    int cmd; /* 1 CONNECT; anything else is refused with reply 0x07 */
} a3s_socks_req;

/* Parse a SOCKS5 greeting + request in buf[0..len): 1 complete (r filled, *used = bytes
 * consumed), 0 need more, -1 malformed. Only "no authentication" is acceptable. */
int a3s_socks_parse(const unsigned char *buf, size_t len, a3s_socks_req *r, size_t *used);

typedef struct a3s_mediator_opts {
    int connect_timeout_ms; /* default 10000 */
    int idle_timeout_ms;    /* default 60000; a connection silent that long is closed */
    int max_connections;    /* default 128; more are refused at once */
    /* listen_fd is a connected AF_UNIX socket over which the relay hands over each
     * accepted TCP connection as an fd (SCM_RIGHTS, one per message), instead of a
     * listening socket: nothing in the sandbox then names a socket path. */
    bool channel;
} a3s_mediator_opts;

/* Serve until stop_fd becomes readable (or hangs up): accept on listen_fd (a listening
 * AF_UNIX socket, or the relay's channel, see opts), one thread per connection. Every refusal is one JSON line written to
 * denial_fd: {"kind":"network","protocol":"http-connect|http|socks5","target":"host:port",
 * "reason":"not granted|internal address|malformed request|too many connections|...",
 * "decision":"deny"}. Returns 0 when stopped, -1 on a setup error. Meant to run in a
 * process of its own (engine/sandbox.c forks it), so threads never meet the caller's. */
int a3s_mediator_serve(int listen_fd, int stop_fd, const a3s_grant *g, size_t n,
                       int denial_fd, const a3s_mediator_opts *opts);

#endif
