/* The host-side network mediator for grants (relay/README.md): it listens on a Unix socket that
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
/* The grants it decides against. Its parts have headers of their own: the request
 * parsers (mediator_parse.h), the address policy (mediator_addr.h), the refusal records
 * (mediator_deny.h). */
#include "grant.h"

typedef struct a3s_mediator_opts {
    int connect_timeout_ms; /* default 10000 */
    int idle_timeout_ms;    /* default 60000; a connection silent that long is closed */
    int max_connections;    /* default 128; more are refused at once */
    int denial_records;     /* records kept verbatim at each end; default 32, at most 1024 */
    /* listen_fd is a connected AF_UNIX socket over which the relay hands over each
     * accepted TCP connection as an fd (SCM_RIGHTS, one per message), instead of a
     * listening socket: nothing in the sandbox then names a socket path. */
    bool channel;
    /* When notify_ready: one byte 'R' is written to ready_fd once the mediator is set up,
     * right before it serves (a3s-sandbox-mediator tells its parent so); a failed write
     * there is a setup error. */
    bool notify_ready;
    int ready_fd;
} a3s_mediator_opts;

/* Serve until stop_fd becomes readable (or hangs up): accept on listen_fd (a listening
 * AF_UNIX socket, or the relay's channel, see opts), one thread per connection.
 * Absolute-form HTTP carries exactly one request per connection (its head with
 * "Connection: close", then exactly its Content-Length body; nothing the client sends
 * after that is forwarded).
 *
 * Refusals go to denial_fd as JSON lines, bounded whatever their number (K =
 * denial_records):
 *   - record lines, {"kind":"network","protocol":"http-connect|http|socks5",
 *     "target":"host:port" (or ""),"reason":"...","decision":"deny"}: the first K written
 *     as they happen, and at stop the last K among the rest (a ring in memory);
 *   - at stop, when there was any refusal, one summary line, always the last:
 *     {"kind":"network","summary":true,"decision":"deny","total":T,"kept_first":F,
 *      "kept_last":L,"dropped":D,"counts":{"<reason>":N,...}} with exact counts per reason
 *     (their sum is T) and D = T - F - L records not written.
 * So the file holds at most 2K + 1 lines: records of at most 512 bytes, the summary a few
 * KiB at most (about 50 bytes per distinct reason).
 * No summary line means the mediator died before its stop (the tail and counts are
 * lost, the first records are not); refusals after the stop are not recorded.
 * Returns 0 when stopped, -1 on a setup error. Meant to run in a process of its own (the
 * program a3s-sandbox-mediator, see protocol.h), so its threads never meet the caller's. */
int a3s_mediator_serve(int listen_fd, int stop_fd, const a3s_grant *g, size_t n,
                       int denial_fd, const a3s_mediator_opts *opts);

/* The helper program a3s-sandbox-mediator (relay/mediator_main.c) that serves in a process
 * of its own: its arguments, fixed descriptors and exit statuses are in protocol.h. */

#endif
