/* Unit tests of the grants (engine/grant.c) and the mediator's address policy
 * (relay/mediator_addr.c): grant parsing and matching, internal and unspecified
 * addresses. Pure: no socket is opened. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "grant.h"
#include "mediator_addr.h"
#include "mediator_cases.h"
#include "tap.h"

/* ---------------------------------------------------------------- pure: grants */

static void test_grant_parse(void)
{
    a3s_grant g;
    a3s_error err;
    ok(a3s_grant_parse("api.example.com", &g, &err) == 0 && strcmp(g.host, "api.example.com") == 0 &&
           g.port == 0,
       "grant: bare host, any port");
    ok(a3s_grant_parse("API.Example.com:443", &g, &err) == 0 &&
           strcmp(g.host, "api.example.com") == 0 && g.port == 443,
       "grant: host lower-cased, port kept");
    ok(a3s_grant_parse("127.0.0.1:8080", &g, &err) == 0 && strcmp(g.host, "127.0.0.1") == 0 &&
           g.port == 8080,
       "grant: IPv4 literal with port");
    ok(a3s_grant_parse("[::1]:443", &g, &err) == 0 && strcmp(g.host, "::1") == 0 && g.port == 443,
       "grant: bracketed IPv6 with port, brackets dropped");
    ok(a3s_grant_parse("[2001:DB8:0:0::1]", &g, &err) == 0 && strcmp(g.host, "2001:db8::1") == 0 &&
           g.port == 0,
       "grant: IPv6 literal canonicalised");
    ok(a3s_grant_parse("a-b.c1.example:65535", &g, &err) == 0 && g.port == 65535,
       "grant: hyphens, digits, port 65535");

    static const char *const bad[] = {
        "",          "*",          "*.example.com", "api.*.com",   "a b",        "a/b",
        "a\\b",      "host:0",     "host:65536",    "host:x",      "user@host",  "host:",
        ":443",      "host:-1",    "host:+80",      "::1",         "[::1",       "[]:80",
        "[1.2.3.4]", "[::1]x",     "a..b",          ".a",          "a.",         "a_b",
        "h\tx",      "127.1",      "2130706433",    "1.2.3.4.5",   "ex?ample",   "host:80:80",
        "[::1]:0",   "h\x7fx",     "h\xc3\xa9x",    "host:080800", "-x.example",  "-oProxyCommand=x",
        "-",         "--help:443", "a.-b.example", "a-.example", "example-",   "a.b-:80",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&err, 0, sizeof err);
        int rc = a3s_grant_parse(bad[i], &g, &err);
        ok(rc < 0 && err.code == A3S_ERR_INVALID && strstr(err.msg, "network grant"),
           "grant refused: '%s' (%s)", shown(bad[i]), err.msg);
    }
    /* The unspecified address reaches the host itself (0.0.0.0 and :: connect to
     * loopback): never a grant, in any spelling. */
    static const char *const unspecified[] = {
        "0.0.0.0",      "0.0.0.0:8080",         "[::]",
        "[::]:80",      "[0:0:0:0:0:0:0:0]:80", "[::ffff:0.0.0.0]:80",
        "[::ffff:0:0]", "0.1.2.3:80",
    };
    for (size_t i = 0; i < sizeof unspecified / sizeof *unspecified; i++) {
        memset(&err, 0, sizeof err);
        int rc = a3s_grant_parse(unspecified[i], &g, &err);
        ok(rc < 0 && err.code == A3S_ERR_INVALID && strstr(err.msg, unspecified[i]),
           "grant refused, names the spec: '%s' (%s)", unspecified[i], err.msg);
    }
    ok(a3s_grant_parse("[::1]:80", &g, &err) == 0 && a3s_grant_parse("127.0.0.1", &g, &err) == 0 &&
           a3s_grant_parse("[::ffff:127.0.0.1]:80", &g, &err) == 0,
       "grant: loopback literals stay allowed (that literal IP only)");
    char longname[400];
    memset(longname, 'a', sizeof longname);
    for (size_t i = 63; i < sizeof longname; i += 64)
        longname[i] = '.';
    longname[sizeof longname - 1] = '\0';
    ok(a3s_grant_parse(longname, &g, &err) < 0, "grant refused: name longer than 253");
    char label[80];
    memset(label, 'b', 64);
    strcpy(label + 64, ".com");
    ok(a3s_grant_parse(label, &g, &err) < 0, "grant refused: 64-byte label");
    ok(a3s_grant_parse(NULL, &g, &err) < 0, "grant refused: NULL");
}

static void test_grants_allow(void)
{
    a3s_grant g[3];
    a3s_error err;
    ok(a3s_grant_parse("api.example.com:443", &g[0], &err) == 0 &&
           a3s_grant_parse("localhost", &g[1], &err) == 0 &&
           a3s_grant_parse("10.0.0.5", &g[2], &err) == 0,
       "allow: grants parsed");
    ok(a3s_grants_allow(g, 3, "api.example.com", 443), "allow: exact host and port");
    ok(a3s_grants_allow(g, 3, "API.EXAMPLE.COM", 443), "allow: host case-insensitive");
    ok(!a3s_grants_allow(g, 3, "api.example.com", 8443), "allow: pinned port 443 refuses 8443");
    ok(!a3s_grants_allow(g, 3, "api.example.com", 80), "allow: pinned port refuses 80");
    ok(!a3s_grants_allow(g, 3, "www.api.example.com", 443), "allow: no subdomain matching");
    ok(!a3s_grants_allow(g, 3, "example.com", 443), "allow: no parent matching");
    ok(!a3s_grants_allow(g, 3, "api.example.com.", 443), "allow: trailing dot is another host");
    ok(a3s_grants_allow(g, 3, "localhost", 1) && a3s_grants_allow(g, 3, "localhost", 65535),
       "allow: portless grant allows any port");
    ok(!a3s_grants_allow(g, 3, "127.0.0.1", 80), "allow: localhost grant does not allow 127.0.0.1");
    ok(!a3s_grants_allow(g, 3, "::1", 80), "allow: localhost grant does not allow ::1");
    ok(a3s_grants_allow(g, 3, "10.0.0.5", 22), "allow: IP literal grant");
    ok(!a3s_grants_allow(g, 3, "10.0.0.50", 22), "allow: IP literal is exact");
    ok(!a3s_grants_allow(g, 3, "localhost", 0), "allow: port 0 never allowed");
    ok(!a3s_grants_allow(g, 3, "", 443) && !a3s_grants_allow(g, 3, NULL, 443),
       "allow: empty host refused");
    ok(!a3s_grants_allow(g, 0, "api.example.com", 443), "allow: no grants, nothing allowed");
    a3s_grant ip;
    ok(a3s_grant_parse("127.0.0.1", &ip, &err) == 0 && !a3s_grants_allow(&ip, 1, "localhost", 80) &&
           a3s_grants_allow(&ip, 1, "127.0.0.1", 80),
       "allow: 127.0.0.1 grant does not allow localhost");
}

static void sockaddr_of(const char *text, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof *ss);
    if (strchr(text, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        s6->sin6_family = AF_INET6;
        if (inet_pton(AF_INET6, text, &s6->sin6_addr) != 1)
            abort();
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        if (inet_pton(AF_INET, text, &s4->sin_addr) != 1)
            abort();
    }
}

static bool unspecified(const char *text)
{
    struct sockaddr_storage ss;
    sockaddr_of(text, &ss);
    return a3s_addr_is_unspecified((struct sockaddr *)&ss);
}

static bool internal(const char *text)
{
    struct sockaddr_storage ss;
    sockaddr_of(text, &ss);
    return a3s_addr_is_internal((struct sockaddr *)&ss);
}

static void test_addr_internal(void)
{
    static const char *const in[] = {
        "127.0.0.1",    "127.255.0.9",     "10.1.2.3",        "172.16.0.1",
        "172.31.255.254", "192.168.1.1",   "169.254.169.254", "169.254.0.1",
        "100.64.0.1",   "100.127.255.254", "0.0.0.0",         "224.0.0.1",
        "255.255.255.255", "::1",          "::",              "fe80::1",
        "fc00::1",      "fd00:ec2::254",   "ff02::1",         "::ffff:127.0.0.1",
        "::ffff:169.254.169.254", "64:ff9b::a00:1", "2002:a00:1::1",
    };
    static const char *const out[] = {
        "93.184.216.34", "2606:2800::1", "8.8.8.8", "172.32.0.1", "100.128.0.1",
        "192.169.0.1",   "1.1.1.1",      "::ffff:93.184.216.34",  "2a00:1450::1",
    };
    for (size_t i = 0; i < sizeof in / sizeof *in; i++)
        ok(internal(in[i]), "internal: %s", in[i]);
    for (size_t i = 0; i < sizeof out / sizeof *out; i++)
        ok(!internal(out[i]), "not internal: %s", out[i]);
    struct sockaddr_un su = {.sun_family = AF_UNIX};
    ok(a3s_addr_is_internal((struct sockaddr *)&su) && a3s_addr_is_internal(NULL),
       "internal: unknown family and NULL fail closed");

    static const char *const unspec[] = {"0.0.0.0", "0.1.2.3", "::", "::ffff:0.0.0.0",
                                         "::ffff:0.9.9.9"};
    static const char *const spec[] = {
        "127.0.0.1", "::1", "::ffff:127.0.0.1", "1.0.0.0", "::ffff:1.0.0.0", "93.184.216.34"};
    for (size_t i = 0; i < sizeof unspec / sizeof *unspec; i++)
        ok(unspecified(unspec[i]) && internal(unspec[i]), "unspecified (and internal): %s",
           unspec[i]);
    for (size_t i = 0; i < sizeof spec / sizeof *spec; i++)
        ok(!unspecified(spec[i]), "not unspecified: %s", spec[i]);
    ok(a3s_addr_is_unspecified((struct sockaddr *)&su) && a3s_addr_is_unspecified(NULL),
       "unspecified: unknown family and NULL fail closed");
}

int main(void)
{
    test_grant_parse();
    test_grants_allow();
    test_addr_internal();
    return tap_done();
}
