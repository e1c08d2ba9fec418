/* Unit tests for engine/capture.c: the global head+tail output budget plus
 * a randomized comparison with a naive model. */
#include "capture.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"

#define FFFD "\xEF\xBF\xBD"

/* The expected marker text (one static buffer: copy it before the next call). */
static char *marker(const char *name, size_t h, size_t t, size_t n)
{
    static char buf[256];
    snprintf(buf, sizeof buf,
             "\n\n[command %s truncated by the global output limit: retained the first %zu "
             "and last %zu of %zu bytes]\n\n",
             name, h, t, n);
    return buf;
}

/* Render `stream` and return the text (caller frees); also the rest. */
static char *render(a3s_capture *c, int stream, size_t *len, char **rest, size_t *rest_len)
{
    char *out = NULL;
    if (a3s_capture_render(c, stream, &out, len, rest, rest_len) != 0)
        return NULL;
    return out;
}

static void test_head_tail_exact(void)
{
    const size_t n = 102400 + 1234;
    char *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + (i * 7 + i / 26) % 26);
    a3s_capture *c = a3s_capture_new(102400);
    ok(c != NULL, "capture created with the default budget");
    size_t head_sum = 0;
    for (size_t off = 0; off < n; off += 8192) {
        size_t k = n - off < 8192 ? n - off : 8192;
        head_sum += a3s_capture_feed(c, 1, data + off, k);
    }
    ok(a3s_capture_total(c) == n, "total counts every byte (%llu)",
       (unsigned long long)a3s_capture_total(c));
    ok(a3s_capture_captured(c) == 102400, "captured is exactly the budget (%llu)",
       (unsigned long long)a3s_capture_captured(c));
    ok(a3s_capture_truncated(c), "over the budget is truncated");
    ok(head_sum == 51200, "feed returns add up to the head size (%zu)", head_sum);

    const char *m = marker("stdout", 51200, 51200, n);
    size_t ml = strlen(m);
    size_t exp_len = 51200 + ml + 51200;
    char *exp = malloc(exp_len + 1);
    memcpy(exp, data, 51200);
    memcpy(exp + 51200, m, ml);
    memcpy(exp + 51200 + ml, data + n - 51200, 51200);
    exp[exp_len] = '\0';

    size_t len = 0, rest_len = 0;
    char *rest = NULL;
    char *out = render(c, 1, &len, &rest, &rest_len);
    ok(out && len == exp_len && memcmp(out, exp, exp_len) == 0 && out[len] == '\0',
       "stdout = exact head + marker + exact tail (len %zu, expected %zu)", len, exp_len);
    ok(out && strstr(out, "[command stdout truncated by the global output limit: retained "
                          "the first 51200 and last 51200 of 103634 bytes]") != NULL,
       "stdout carries the literal marker text");
    ok(rest && rest_len == ml + 51200 && memcmp(rest, exp + 51200, rest_len) == 0,
       "rest = marker + tail (raw)");
    free(out);
    free(rest);

    rest = NULL;
    out = render(c, 2, &len, &rest, &rest_len);
    ok(out && len == 0 && out[0] == '\0', "stderr is empty");
    ok(rest && rest_len == 0, "stderr rest is empty");
    free(out);
    free(rest);
    free(exp);
    free(data);
    a3s_capture_free(c);
}

static bool only(const char *s, size_t n, char ch)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ch)
            return false;
    return true;
}

static void test_stream_identity(void)
{
    const size_t n = 70 * 1024;
    char *o = malloc(n), *e = malloc(n);
    memset(o, 'o', n);
    memset(e, 'e', n);

    /* Sequential: all stdout, then all stderr. */
    a3s_capture *c = a3s_capture_new(102400);
    a3s_capture_feed(c, 1, o, n);
    a3s_capture_feed(c, 2, e, n);
    size_t lo = 0, le = 0;
    char *so = render(c, 1, &lo, NULL, NULL);
    char *se = render(c, 2, &le, NULL, NULL);
    ok(a3s_capture_total(c) == 2 * n && a3s_capture_captured(c) == 102400,
       "sequential: total %zu, captured 102400", 2 * n);
    {
        const char *m = marker("stdout", 51200, 0, n);
        size_t ml = strlen(m);
        ok(so && lo == 51200 + ml && only(so, 51200, 'o') && memcmp(so + 51200, m, ml) == 0,
           "sequential: stdout = 51200 'o' + marker(51200, 0, %zu), no 'e'", n);
    }
    {
        const char *m = marker("stderr", 0, 51200, n);
        size_t ml = strlen(m);
        ok(se && le == ml + 51200 && memcmp(se, m, ml) == 0 && only(se + ml, 51200, 'e'),
           "sequential: stderr = marker(0, 51200, %zu) + 51200 'e', no 'o'", n);
    }
    free(so);
    free(se);
    a3s_capture_free(c);

    /* Interleaved 2 KiB chunks: both streams share the head and the ring. */
    c = a3s_capture_new(102400);
    for (size_t off = 0; off < n; off += 2048) {
        a3s_capture_feed(c, 1, o + off, 2048);
        a3s_capture_feed(c, 2, e + off, 2048);
    }
    so = render(c, 1, &lo, NULL, NULL);
    se = render(c, 2, &le, NULL, NULL);
    /* 70 chunks alternate o,e. Head: the first 25 chunks (13 'o', 12 'e'); tail: the last
     * 25 chunks (12 'o', 13 'e'). Each stream lost 20480 bytes. */
    char mo[256], me[256]; /* marker() reuses one buffer: copy each */
    snprintf(mo, sizeof mo, "%s", marker("stdout", 26624, 24576, n));
    snprintf(me, sizeof me, "%s", marker("stderr", 24576, 26624, n));
    ok(so && lo == 26624 + strlen(mo) + 24576 && only(so, 26624, 'o') &&
           memcmp(so + 26624, mo, strlen(mo)) == 0 && only(so + 26624 + strlen(mo), 24576, 'o'),
       "interleaved: stdout only 'o', marker with H 26624 / T 24576");
    ok(se && le == 24576 + strlen(me) + 26624 && only(se, 24576, 'e') &&
           memcmp(se + 24576, me, strlen(me)) == 0 && only(se + 24576 + strlen(me), 26624, 'e'),
       "interleaved: stderr only 'e', marker with H 24576 / T 26624");
    free(so);
    free(se);
    a3s_capture_free(c);
    free(o);
    free(e);
}

static void test_exact_limit(void)
{
    a3s_capture *c = a3s_capture_new(102400);
    char *d = malloc(102400);
    for (size_t i = 0; i < 102400; i++)
        d[i] = (char)('A' + i % 23);
    /* Mixed: 60000 stdout then 42400 stderr, exactly the budget. */
    a3s_capture_feed(c, 1, d, 60000);
    a3s_capture_feed(c, 2, d + 60000, 42400);
    ok(a3s_capture_total(c) == 102400 && a3s_capture_captured(c) == 102400,
       "exact limit: everything captured");
    ok(!a3s_capture_truncated(c), "exact limit: not truncated");
    size_t lo, le, rl = 99;
    char *rest = NULL;
    char *so = render(c, 1, &lo, &rest, &rl);
    char *se = render(c, 2, &le, NULL, NULL);
    ok(so && lo == 60000 && memcmp(so, d, 60000) == 0, "exact limit: stdout verbatim");
    ok(se && le == 42400 && memcmp(se, d + 60000, 42400) == 0, "exact limit: stderr verbatim");
    ok(so && !strstr(so, "truncated") && se && !strstr(se, "truncated"), "exact limit: no marker");
    ok(rest && rl == 60000 - 51200 && memcmp(rest, d + 51200, rl) == 0,
       "exact limit: stdout rest is its tail part only (%zu bytes)", rl);
    free(so);
    free(se);
    free(rest);

    /* One more byte tips it over: truncated, and the first stream loses it. */
    a3s_capture_feed(c, 2, "Z", 1);
    ok(a3s_capture_truncated(c) && a3s_capture_captured(c) == 102400,
       "one byte past the limit is truncated");
    so = render(c, 1, &lo, NULL, NULL);
    ok(so && strstr(so, marker("stdout", 51200, 8799, 60000)) != NULL,
       "the evicted byte is accounted to stdout (H 51200, T 8799 of 60000)");
    se = render(c, 2, &le, NULL, NULL);
    ok(se && !strstr(se, "truncated") && le == 42401 && se[42400] == 'Z',
       "stderr lost nothing: no marker");
    free(so);
    free(se);
    free(d);
    a3s_capture_free(c);
}

static void test_invalid_utf8(void)
{
    a3s_capture *c = a3s_capture_new(102400);
    a3s_capture_feed(c, 1, "\xFF\x6F\xFE", 3);
    a3s_capture_feed(c, 2, "\x80\x65", 2);
    size_t lo, le;
    char *so = render(c, 1, &lo, NULL, NULL);
    char *se = render(c, 2, &le, NULL, NULL);
    ok_streq(so, FFFD "o" FFFD, "FF 6F FE -> U+FFFD o U+FFFD");
    ok_streq(se, FFFD "e", "80 65 -> U+FFFD e");
    ok(lo == 7 && le == 4, "rendered lengths 7 and 4");
    ok(a3s_capture_total(c) == 5 && a3s_capture_captured(c) == 5, "total 5, captured 5");
    free(so);
    free(se);
    a3s_capture_free(c);
}

static void test_split_utf8(void)
{
    a3s_capture *c = a3s_capture_new(1024);
    /* "é" (C3 A9) split across two feeds, "€" (E2 82 AC) with stderr in between,
     * "😀" (F0 9F 98 80) split over three feeds. */
    a3s_capture_feed(c, 1, "a\xC3", 2);
    a3s_capture_feed(c, 1, "\xA9" "b\xE2\x82", 4);
    a3s_capture_feed(c, 2, "x", 1);
    a3s_capture_feed(c, 1, "\xAC\xF0", 2);
    a3s_capture_feed(c, 1, "\x9F\x98", 2);
    a3s_capture_feed(c, 1, "\x80!", 2);
    size_t lo;
    char *so = render(c, 1, &lo, NULL, NULL);
    char *se = render(c, 2, NULL, NULL, NULL);
    ok_streq(so, "a\xC3\xA9" "b\xE2\x82\xAC\xF0\x9F\x98\x80!", "split characters stay intact");
    ok_streq(se, "x", "stderr between the halves does not break stdout");
    free(so);
    free(se);
    a3s_capture_free(c);

    /* A character split between the ring's wrap point survives too (budget 10: head 5,
     * tail 5; the ring wraps while the character is written). */
    c = a3s_capture_new(10);
    a3s_capture_feed(c, 1, "01234", 5);
    a3s_capture_feed(c, 1, "abc", 3);
    a3s_capture_feed(c, 1, "\xE2\x82", 2);
    a3s_capture_feed(c, 1, "\xAC", 1);
    so = render(c, 1, &lo, NULL, NULL);
    char exp[512];
    snprintf(exp, sizeof exp, "01234%sbc\xE2\x82\xAC", marker("stdout", 5, 5, 11));
    ok_streq(so, exp, "a character across the ring wrap stays intact");
    free(so);
    a3s_capture_free(c);
}

static void test_small_budget(void)
{
    ok(a3s_capture_new(0) == NULL, "budget 0 is refused");

    a3s_capture *c = a3s_capture_new(10); /* head 5, tail 5 */
    ok(a3s_capture_feed(c, 1, "012", 3) == 3, "feed 3 of 3 into the head");
    ok(a3s_capture_feed(c, 2, "abcd", 4) == 2, "feed returns 2: head had 2 left");
    ok(a3s_capture_feed(c, 1, "3456", 4) == 0, "head full: feed returns 0");
    ok(a3s_capture_total(c) == 11 && a3s_capture_captured(c) == 10, "total 11, captured 10");
    ok(a3s_capture_truncated(c), "11 > 10 is truncated");
    /* head: 0 1 2 (out) a b (err); ring (5): c d (err) 3 4 5 6 (out) -> 'c' evicted. */
    size_t lo, le, rl;
    char *rest = NULL;
    char *so = render(c, 1, &lo, NULL, NULL);
    char *se = render(c, 2, &le, &rest, &rl);
    char exp[512];
    ok_streq(so, "0123456", "stdout lost nothing: no marker");
    snprintf(exp, sizeof exp, "ab%sd", marker("stderr", 2, 1, 4));
    ok_streq(se, exp, "stderr: head ab, marker(2, 1, 4), tail d");
    ok(rest && rl == strlen(exp) - 2 && memcmp(rest, exp + 2, rl) == 0, "stderr rest");
    free(so);
    free(se);
    free(rest);

    /* A chunk larger than the ring: only its last bytes stay. */
    ok(a3s_capture_feed(c, 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 26) == 0, "big chunk: 0 to head");
    so = render(c, 1, &lo, NULL, NULL);
    se = render(c, 2, &le, NULL, NULL);
    snprintf(exp, sizeof exp, "012%sVWXYZ", marker("stdout", 3, 5, 33));
    ok_streq(so, exp, "stdout: head 012, marker(3, 5, 33), tail VWXYZ");
    snprintf(exp, sizeof exp, "ab%s", marker("stderr", 2, 0, 4));
    ok_streq(se, exp, "stderr: tail fully evicted, marker(2, 0, 4)");
    ok(a3s_capture_total(c) == 37 && a3s_capture_captured(c) == 10, "total 37, captured 10");
    free(so);
    free(se);
    a3s_capture_free(c);

    /* budget 1: head 0, tail 1. */
    c = a3s_capture_new(1);
    ok(c && a3s_capture_feed(c, 1, "xy", 2) == 0, "budget 1: nothing goes to the head");
    so = render(c, 1, &lo, NULL, NULL);
    snprintf(exp, sizeof exp, "%sy", marker("stdout", 0, 1, 2));
    ok_streq(so, exp, "budget 1: marker(0, 1, 2) + y");
    free(so);
    a3s_capture_free(c);

    /* budget 3: head 1, tail 2; not truncated at 3. */
    c = a3s_capture_new(3);
    ok(a3s_capture_feed(c, 2, "xyz", 3) == 1 && !a3s_capture_truncated(c),
       "budget 3: head 1, exactly full is not truncated");
    se = render(c, 2, &le, NULL, NULL);
    ok_streq(se, "xyz", "budget 3: stderr verbatim");
    free(se);
    a3s_capture_free(c);

    /* Head is capped at 64 KiB even for a big budget. */
    c = a3s_capture_new(1000000);
    char *big = calloc(1, 200000);
    ok(a3s_capture_feed(c, 1, big, 200000) == 65536, "big budget: head capped at 65536");
    ok(a3s_capture_captured(c) == 200000 && !a3s_capture_truncated(c),
       "big budget: 200000 bytes all kept");
    free(big);
    a3s_capture_free(c);
}

static void test_lossy(void)
{
    static const struct {
        const char *in;
        size_t len;
        const char *out;
        const char *what;
    } cases[] = {
        {"", 0, "", "empty"},
        {"plain ascii", 11, "plain ascii", "ascii unchanged"},
        {"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80",
         "valid 2/3/4-byte sequences unchanged"},
        {"\xC0\x80", 2, FFFD FFFD, "overlong C0 80 -> 2 replacements"},
        {"\xE0\x80\x80", 3, FFFD FFFD FFFD, "overlong E0 80 80 -> 3 replacements"},
        {"\xED\xA0\x80", 3, FFFD FFFD FFFD, "surrogate ED A0 80 -> 3 replacements"},
        {"\xF4\x90\x80\x80", 4, FFFD FFFD FFFD FFFD, "above U+10FFFF -> 4 replacements"},
        {"\xE2\x82", 2, FFFD, "truncated sequence at the end -> one replacement"},
        {"\xE2\x82" "A", 3, FFFD "A", "truncated sequence before ASCII -> one replacement"},
        {"\xF0\x9F\x98" "\xF0\x9F\x98\x80", 7, FFFD "\xF0\x9F\x98\x80",
         "maximal subpart then a valid char"},
        {"\xF5\xFF", 2, FFFD FFFD, "F5 and FF are never valid"},
        {"\xEF\xBF\xBD", 3, FFFD, "U+FFFD itself is kept"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = 99;
        char *o = a3s_utf8_lossy(cases[i].in, cases[i].len, &n);
        ok(o && n == strlen(cases[i].out) && strcmp(o, cases[i].out) == 0, "lossy: %s",
           cases[i].what);
        free(o);
    }
    size_t n = 0;
    char *o = a3s_utf8_lossy("a\0b", 3, &n);
    ok(o && n == 3 && memcmp(o, "a\0b", 4) == 0, "lossy: embedded NUL kept, length exact");
    free(o);
}

/* ---- randomized comparison with a naive model ------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Model: keep every byte with its stream; head = first head_cap bytes, tail = last
 * tail_cap bytes of the rest. */
static bool model_check(size_t budget, int rounds, size_t maxchunk)
{
    size_t cap = 1 << 20;
    char *all = malloc(cap);
    unsigned char *tag = malloc(cap);
    size_t total = 0;
    size_t headsum[2] = {0, 0};
    a3s_capture *c = a3s_capture_new(budget);
    bool good = c != NULL;
    static const char alphabet[] = "abc\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xFF\n";
    for (int r = 0; r < rounds && good; r++) {
        int s = (int)(rng() % 2) + 1;
        size_t len = (size_t)(rng() % (maxchunk + 1));
        if (total + len > cap)
            break;
        for (size_t i = 0; i < len; i++) {
            all[total + i] = alphabet[rng() % (sizeof alphabet - 1)];
            tag[total + i] = (unsigned char)s;
        }
        headsum[s - 1] += a3s_capture_feed(c, s, all + total, len);
        total += len;
    }
    size_t head_cap = budget / 2 < 65536 ? budget / 2 : 65536;
    size_t tail_cap = budget - head_cap;
    size_t hn = total < head_cap ? total : head_cap;
    size_t tstart = total - hn > tail_cap ? total - tail_cap : hn;
    good = good && a3s_capture_total(c) == total &&
           a3s_capture_captured(c) == hn + (total - tstart) &&
           a3s_capture_truncated(c) == (total > budget);
    char *exp = malloc(total + 512);
    for (int s = 1; s <= 2 && good; s++) {
        size_t h = 0, t = 0, n = 0, o = 0;
        for (size_t i = 0; i < total; i++)
            if (tag[i] == s) {
                n++;
                if (i < hn)
                    exp[o++] = all[i], h++;
            }
        size_t after_head = o;
        for (size_t i = tstart; i < total; i++)
            if (tag[i] == s)
                t++;
        if (h + t < n) {
            const char *m = marker(s == 1 ? "stdout" : "stderr", h, t, n);
            memcpy(exp + o, m, strlen(m));
            o += strlen(m);
        }
        for (size_t i = tstart; i < total; i++)
            if (tag[i] == s)
                exp[o++] = all[i];
        size_t el = 0, gl = 0, rl = 0;
        char *e = a3s_utf8_lossy(exp, o, &el);
        char *rest = NULL;
        char *g = render(c, s, &gl, &rest, &rl);
        good = e && g && el == gl && memcmp(e, g, el) == 0 && rest &&
               rl == o - after_head && memcmp(rest, exp + after_head, rl) == 0 &&
               headsum[s - 1] == h;
        free(e);
        free(g);
        free(rest);
    }
    free(exp);
    free(all);
    free(tag);
    a3s_capture_free(c);
    return good;
}

static void test_model(void)
{
    static const size_t budgets[] = {1, 2, 3, 7, 10, 64, 1000, 4096, 102400, 200000};
    for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        bool all_good = true;
        for (int trial = 0; trial < 20 && all_good; trial++) {
            size_t maxchunk = trial % 3 == 0 ? 3 : trial % 3 == 1 ? 97 : 9000;
            all_good = model_check(budgets[b], 200, maxchunk);
        }
        ok(all_good, "budget %zu: renders, rest, counts and feed returns match the model",
           budgets[b]);
    }
}

static void test_throughput(void)
{
    const size_t chunk = 65536, total = 100u * 1024 * 1024;
    char *buf = malloc(chunk);
    memset(buf, 'x', chunk);
    static const size_t budgets[] = {102400, 8u * 1024 * 1024};
    for (size_t b = 0; b < 2; b++) {
        a3s_capture *c = a3s_capture_new(budgets[b]);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (size_t off = 0; off < total; off += chunk)
            a3s_capture_feed(c, (int)((off / chunk) % 2) + 1, buf, chunk);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        printf("# capture feed throughput (budget %zu): %.2f GB/s (100 MiB in %.4f s)\n",
               budgets[b], secs > 0 ? (double)total / secs / 1e9 : 0.0, secs);
        ok(a3s_capture_total(c) == total && a3s_capture_captured(c) == budgets[b],
           "throughput run (budget %zu) accounted every byte", budgets[b]);
        a3s_capture_free(c);
    }
    free(buf);
}

int main(void)
{
    test_head_tail_exact();
    test_stream_identity();
    test_exact_limit();
    test_invalid_utf8();
    test_split_utf8();
    test_small_budget();
    test_lossy();
    test_model();
    test_throughput();
    return tap_done();
}
