/* The mediator's address policy (mediator_addr.h): internal ranges, the host's own
 * addresses, and whether a resolved address may be an upstream. */
#include "mediator_addr.h"

#include <errno.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* ------------------------------------------------------------------ address policy */

static bool v4_internal(const unsigned char b[4])
{
    if (b[0] == 0 || b[0] == 10 || b[0] == 127)     /* this network, RFC 1918, loopback */
        return true;
    if (b[0] == 100 && (b[1] & 0xc0) == 64)           /* CGNAT 100.64/10 */
        return true;
    if (b[0] == 169 && b[1] == 254)                   /* link-local and cloud metadata */
        return true;
    if (b[0] == 172 && (b[1] & 0xf0) == 16)           /* RFC 1918 */
        return true;
    if (b[0] == 192 && b[1] == 168)                   /* RFC 1918 */
        return true;
    return b[0] >= 224;                               /* multicast, reserved, broadcast */
}

bool a3s_addr_is_internal(const struct sockaddr *sa)
{
    if (!sa)
        return true;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        unsigned char b[4];
        memcpy(b, &in->sin_addr, 4);
        return v4_internal(b);
    }
    if (sa->sa_family != AF_INET6)
        return true; /* nothing else is an upstream we understand: fail closed */
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
    const unsigned char *b = in6->sin6_addr.s6_addr;
    static const unsigned char zero[12];
    if (memcmp(b, zero, 10) == 0 && b[10] == 0xff && b[11] == 0xff)
        return v4_internal(b + 12);                   /* IPv4-mapped */
    if (memcmp(b, zero, 12) == 0)                     /* ::, ::1, IPv4-compatible */
        return (b[12] | b[13] | b[14]) == 0 ? true : v4_internal(b + 12);
    if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) {
        if (memcmp(b + 4, zero, 8) == 0)
            return v4_internal(b + 12);               /* NAT64 64:ff9b::/96 */
        return true;                                  /* local-use NAT64 64:ff9b:1::/48 */
    }
    if (b[0] == 0x20 && b[1] == 0x02)
        return v4_internal(b + 2);                    /* 6to4 embeds an IPv4 address */
    if ((b[0] & 0xfe) == 0xfc)                        /* unique local fc00::/7 (fd00:ec2::254) */
        return true;
    if (b[0] == 0xfe && (b[1] & 0x80) == 0x80)        /* link-local fe80::/10, site-local */
        return true;
    return b[0] == 0xff;                              /* multicast */
}

/* ------------------------------------------------------------------ host addresses */

#define OWN_REFRESH_MS 1000

static const unsigned char v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* addr as IPv6: IPv4 mapped; IPv4-mapped and IPv4-compatible IPv6 stay as the IPv4 they
 * carry (the kernel connects ::ffff:a.b.c.d as a.b.c.d). false for other families. */
static bool as_v6(const struct sockaddr *sa, struct in6_addr *out)
{
    if (sa->sa_family == AF_INET) {
        memcpy(out->s6_addr, v4_mapped_prefix, 12);
        memcpy(out->s6_addr + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family != AF_INET6)
        return false;
    memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, sizeof *out);
    static const unsigned char zero[12];
    if (memcmp(out->s6_addr, zero, 12) == 0 && (out->s6_addr[12] | out->s6_addr[13]) != 0)
        memcpy(out->s6_addr, v4_mapped_prefix, 12); /* ::a.b.c.d (not ::, ::1) */
    return true;
}

static int host_addrs_read(a3s_host_addrs *h)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) < 0)
        return -1;
    size_t n = 0;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next)
        n++;
    struct in6_addr *a = calloc(n ? n : 1, sizeof *a);
    if (!a) {
        freeifaddrs(all);
        errno = ENOMEM;
        return -1;
    }
    size_t k = 0;
    for (const struct ifaddrs *i = all; i; i = i->ifa_next)
        if (i->ifa_addr && as_v6(i->ifa_addr, &a[k]))
            k++;
    freeifaddrs(all);
    free(h->a);
    h->a = a;
    h->n = k;
    h->read_ms = a3s_now_ms();
    h->stale = false;
    return 0;
}

/* Listen for address changes, then read the list (in that order: a change between the
 * two is either in the list or announced). Without netlink, the timer alone re-reads. */
int a3s_host_addrs_init(a3s_host_addrs *h)
{
    memset(h, 0, sizeof *h);
    if (pthread_mutex_init(&h->lock, NULL) != 0)
        return -1;
    h->nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK,
                             .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR};
    if (h->nl >= 0 && bind(h->nl, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(h->nl);
        h->nl = -1;
    }
    if (host_addrs_read(h) < 0) {
        int e = errno;
        if (h->nl >= 0)
            close(h->nl);
        pthread_mutex_destroy(&h->lock);
        errno = e;
        return -1;
    }
    return 0;
}

void a3s_host_addrs_free(a3s_host_addrs *h)
{
    if (h->nl >= 0)
        close(h->nl);
    pthread_mutex_destroy(&h->lock);
    free(h->a);
    h->a = NULL;
}

/* 1 when addr is one of the host's own, 0 when not, -1 when the list could not be
 * brought up to date (the caller refuses: fail closed). */
int a3s_host_addrs_has(a3s_host_addrs *h, const struct sockaddr *addr)
{
    struct in6_addr want;
    if (!as_v6(addr, &want))
        return -1;
    pthread_mutex_lock(&h->lock);
    /* Any message (or an overflow: ENOBUFS) means something changed: re-read. */
    for (char buf[4096]; h->nl >= 0;) {
        ssize_t r = recv(h->nl, buf, sizeof buf, MSG_DONTWAIT);
        if (r > 0 || (r < 0 && errno == ENOBUFS)) {
            h->stale = true;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            h->stale = true; /* a broken socket: trust only fresh readings */
        break;
    }
    int rc = 0;
    if ((h->stale || a3s_now_ms() - h->read_ms >= OWN_REFRESH_MS) && host_addrs_read(h) < 0) {
        h->stale = true;
        rc = -1;
    }
    for (size_t i = 0; rc == 0 && i < h->n; i++)
        if (memcmp(&h->a[i], &want, sizeof want) == 0)
            rc = 1;
    pthread_mutex_unlock(&h->lock);
    return rc;
}

/* Whether a resolved address may be an upstream: never an unspecified one; for a name,
 * no internal range and none of the host's own addresses (an IP literal is allowed as
 * is: the decision already matched a grant naming exactly that literal). */
bool a3s_upstream_acceptable(a3s_host_addrs *own, const struct sockaddr *sa, bool literal)
{
    if (a3s_addr_is_unspecified(sa))
        return false;
    if (literal)
        return true;
    return !a3s_addr_is_internal(sa) && a3s_host_addrs_has(own, sa) == 0;
}
