/* The mediator's address policy: which resolved addresses may be an upstream. Internal
 * ranges are refused for names, and so is every address of the host's own interfaces,
 * kept up to date from the kernel's address-change notifications (netlink). */
#ifndef A3S_MEDIATOR_ADDR_H
#define A3S_MEDIATOR_ADDR_H

#include <stdbool.h>
#include <stddef.h>

#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>

#include "grant.h"

/* Address policy after resolution: loopback, private (RFC 1918, fc00::/7), link-local
 * (169.254/16, fe80::/10), unspecified, multicast, CGNAT (100.64/10) and metadata
 * (169.254.169.254, fd00:ec2::254) addresses are refused unless the grant names that
 * exact IP literally. IPv4-mapped and embedding forms are judged as their IPv4 address.
 * The serving side also refuses every address assigned to one of the host's interfaces
 * (read with getifaddrs, re-read as soon as the kernel reports an address change and at
 * least every second), with the same literal-grant exception. */
bool a3s_addr_is_internal(const struct sockaddr *sa);

/* Every address on one of the host's interfaces, as IPv6 (IPv4 ones mapped). Re-read
 * when the kernel reports an address change on `nl`, and at most a second after the
 * last reading in any case. */
typedef struct a3s_host_addrs {
    pthread_mutex_t lock;
    int nl;                     /* NETLINK_ROUTE, address-change groups; -1 if none */
    bool stale;                 /* re-read before the next answer */
    unsigned long long read_ms; /* when the list was read */
    size_t n;
    struct in6_addr *a;
} a3s_host_addrs;

/* Listen for address changes, then read the list: 0, or -1 with errno (nothing held). */
int a3s_host_addrs_init(a3s_host_addrs *h);
void a3s_host_addrs_free(a3s_host_addrs *h);

/* 1 when addr is one of the host's own, 0 when not, -1 when the list could not be
 * brought up to date (the caller refuses: fail closed). Thread-safe. */
int a3s_host_addrs_has(a3s_host_addrs *h, const struct sockaddr *addr);

/* Whether a resolved address may be an upstream: never an unspecified one; for a name,
 * no internal range and none of the host's own addresses (an IP literal is allowed as
 * is: the decision already matched a grant naming exactly that literal). */
bool a3s_upstream_acceptable(a3s_host_addrs *own, const struct sockaddr *sa, bool literal);

#endif
