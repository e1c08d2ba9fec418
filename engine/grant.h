/* Network grants (README "Network grants"): the exact origins a mediated run may reach. The engine
 * parses and normalizes them (the approval digest is computed over normalized grants);
 * the host-side mediator (relay/) decides every request against them, and its request
 * parsers validate hosts and authorities the same way. ISO C + POSIX only. */
#ifndef A3S_GRANT_H
#define A3S_GRANT_H

#include <stdbool.h>
#include <stddef.h>

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
 * labels outside [A-Za-z0-9-] (except IP literals), ports outside 1..65535, unspecified
 * addresses (0.0.0.0/8, ::, ::ffff:0.0.0.0/104: they connect to the host itself), and
 * anything longer than A3S_GRANT_HOST_MAX: A3S_ERR_INVALID naming the spec. */
int a3s_grant_parse(const char *spec, a3s_grant *g, a3s_error *err);

/* true when a request for host:port is covered by one of the grants: exact host
 * (case-insensitive; "localhost" and "127.0.0.1" are different hosts), and the grant's
 * port when it has one. */
bool a3s_grants_allow(const a3s_grant *g, size_t n, const char *host, int port);

/* Validate s[0..n) as a host and write it lower-cased (IPv6 canonical) to out, which
 * holds A3S_GRANT_HOST_MAX + 1 bytes. A ':' means an IPv6 literal. Returns NULL or why. */
const char *a3s_grant_host_check(const char *s, size_t n, char *out);

/* "host", "host:port", "[v6]" or "[v6]:port" -> host (canonical, A3S_GRANT_HOST_MAX + 1
 * bytes) and *port (0 when absent). Returns NULL or why. */
const char *a3s_grant_authority_parse(const char *s, size_t n, char *host, int *port);

/* ASCII-only case-insensitive comparison of n bytes, so the locale can never change what
 * matches. */
bool a3s_ascii_ncase_eq(const char *a, const char *b, size_t n);

/* An IP literal as a socket address (port 0); false for names. */
bool a3s_addr_literal(const char *host, struct sockaddr_storage *ss);

/* 0.0.0.0/8, :: and ::ffff:0.0.0.0/104: these reach the host itself, so they are never
 * an upstream, not even when a grant names them literally. NULL and unknown families
 * count as unspecified (fail closed). */
bool a3s_addr_is_unspecified(const struct sockaddr *sa);

#endif
