/* Request texts shared by the mediator's unit tests (test_mediator_*.c): shown() keeps a
 * quoted request on one TAP line, and the corpus of malformed CONNECT lines is
 * refused by the parser and by a live mediator alike. */
#ifndef A3S_MEDIATOR_CASES_H
#define A3S_MEDIATOR_CASES_H

#include <stddef.h>

/* Test descriptions quote requests: keep TAP lines on one line. */
static inline const char *shown(const char *s)
{
    static char buf[4][128];
    static int k;
    char *o = buf[k++ % 4];
    size_t j = 0;
    for (; *s && j + 4 < sizeof buf[0]; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\r' || c == '\n') {
            o[j++] = '\\';
            o[j++] = c == '\r' ? 'r' : 'n';
        } else {
            o[j++] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
        }
    }
    o[j] = '\0';
    return o;
}
/* Malformed CONNECT request lines, every one refused. */
static const char *const bad_connect_corpus[] = {
    "",
    "GET / HTTP/1.1",
    "CONNECT",
    "CONNECT ",
    "CONNECT :443",
    "CONNECT /evil:443",
    "CONNECT example.com",
    "CONNECT example.com:",
    "CONNECT example.com:65536",
    "CONNECT example.com:-1",
    "CONNECT example.com:0x50",
    "CONNECT example.com:abc",
    "CONNECT example.com:443 extra junk trailing",
    "CONNECT  HTTP/1.1",
    "POST CONNECT example.com:443 HTTP/1.1",
};

#endif
