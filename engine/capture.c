/* The global head+tail output budget (README "Limits").
 *
 * Layout: each stream has its own head buffer (head bytes of one stream, in arrival
 * order; the two together never exceed head_cap), and one shared tail ring whose every
 * byte has a stream tag in a parallel array. The feed path is memcpy/memset only; the
 * per-stream tail counts are derived from the tags when rendering, so no per-byte work
 * happens while output streams in. */
#include "capture.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The head never exceeds 64 KiB, whatever the budget. */
#define A3S_CAPTURE_HEAD_MAX ((size_t)65536)

struct a3s_capture {
    size_t budget;
    size_t head_cap;       /* min(budget/2, 64 KiB) */
    size_t head_fill;      /* head bytes used, both streams together */
    char *head[2];         /* per-stream head bytes, each head_cap long */
    size_t head_len[2];

    size_t tail_cap;       /* budget - head_cap, always >= 1 */
    size_t tail_pos;       /* next write index in the ring */
    size_t tail_fill;      /* valid ring bytes (<= tail_cap) */
    char *ring;
    unsigned char *tag;    /* stream (1 or 2) of each ring byte */

    uint64_t total;        /* all bytes seen */
    uint64_t stream_total[2];
};

a3s_capture *a3s_capture_new(size_t budget)
{
    if (budget == 0)
        return NULL;
    a3s_capture *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->budget = budget;
    c->head_cap = budget / 2 < A3S_CAPTURE_HEAD_MAX ? budget / 2 : A3S_CAPTURE_HEAD_MAX;
    c->tail_cap = budget - c->head_cap;
    /* +1 keeps malloc(0) out of the picture when the head is empty (budget 1). */
    c->head[0] = malloc(c->head_cap + 1);
    c->head[1] = malloc(c->head_cap + 1);
    c->ring = malloc(c->tail_cap);
    c->tag = malloc(c->tail_cap);
    if (!c->head[0] || !c->head[1] || !c->ring || !c->tag) {
        a3s_capture_free(c);
        return NULL;
    }
    return c;
}

void a3s_capture_free(a3s_capture *c)
{
    if (!c)
        return;
    free(c->head[0]);
    free(c->head[1]);
    free(c->ring);
    free(c->tag);
    free(c);
}

/* Append bytes to the tail ring, overwriting the oldest ones. */
static void ring_put(a3s_capture *c, unsigned char stream, const char *data, size_t len)
{
    if (len >= c->tail_cap) {
        /* Only the last tail_cap bytes can survive: copy just those. */
        memcpy(c->ring, data + (len - c->tail_cap), c->tail_cap);
        memset(c->tag, stream, c->tail_cap);
        c->tail_pos = 0;
        c->tail_fill = c->tail_cap;
        return;
    }
    size_t first = c->tail_cap - c->tail_pos;
    if (first > len)
        first = len;
    memcpy(c->ring + c->tail_pos, data, first);
    memset(c->tag + c->tail_pos, stream, first);
    if (len > first) {
        memcpy(c->ring, data + first, len - first);
        memset(c->tag, stream, len - first);
    }
    c->tail_pos = (c->tail_pos + len) % c->tail_cap;
    c->tail_fill = c->tail_fill + len > c->tail_cap ? c->tail_cap : c->tail_fill + len;
}

size_t a3s_capture_feed(a3s_capture *c, int stream, const char *data, size_t len)
{
    /* Unknown streams are not output of the command: ignore them rather than guess. */
    if (!c || (stream != 1 && stream != 2) || len == 0 || !data)
        return 0;
    int s = stream - 1;
    c->total += len;
    c->stream_total[s] += len;

    size_t h = c->head_cap - c->head_fill;
    if (h > len)
        h = len;
    if (h) {
        memcpy(c->head[s] + c->head_len[s], data, h);
        c->head_len[s] += h;
        c->head_fill += h;
    }
    if (len > h)
        ring_put(c, (unsigned char)stream, data + h, len - h);
    return h;
}

uint64_t a3s_capture_total(const a3s_capture *c)
{
    return c ? c->total : 0;
}

uint64_t a3s_capture_captured(const a3s_capture *c)
{
    return c ? (uint64_t)c->head_fill + c->tail_fill : 0;
}

bool a3s_capture_truncated(const a3s_capture *c)
{
    return c && c->total > c->budget;
}

/* Oldest-first view of the ring as two contiguous pieces. */
static void ring_spans(const a3s_capture *c, size_t off[2], size_t len[2])
{
    if (c->tail_fill < c->tail_cap) {
        /* Not wrapped yet: bytes sit at [0, fill) and tail_pos == fill. */
        off[0] = 0;
        len[0] = c->tail_fill;
        off[1] = 0;
        len[1] = 0;
    } else {
        off[0] = c->tail_pos;
        len[0] = c->tail_cap - c->tail_pos;
        off[1] = 0;
        len[1] = c->tail_pos;
    }
}

/* Copy the ring bytes tagged `stream`, oldest first, to dst (NULL: only count). Runs of
 * one stream are copied with memcpy. */
static size_t ring_collect(const a3s_capture *c, unsigned char stream, char *dst)
{
    size_t off[2], len[2], n = 0;
    ring_spans(c, off, len);
    for (int k = 0; k < 2; k++) {
        const unsigned char *t = c->tag + off[k];
        const char *b = c->ring + off[k];
        size_t i = 0;
        while (i < len[k]) {
            if (t[i] != stream) {
                i++;
                continue;
            }
            size_t j = i + 1;
            while (j < len[k] && t[j] == stream)
                j++;
            if (dst)
                memcpy(dst + n, b + i, j - i);
            n += j - i;
            i = j;
        }
    }
    return n;
}

size_t a3s_capture_head(const a3s_capture *c, int stream, const char **p)
{
    if (!c || (stream != 1 && stream != 2)) {
        *p = NULL;
        return 0;
    }
    *p = (const char *)c->head[stream - 1];
    return c->head_len[stream - 1];
}

int a3s_capture_render(const a3s_capture *c, int stream, char **out, size_t *out_len,
                       char **rest, size_t *rest_len)
{
    /* Beyond the header's ENOMEM case, bad arguments also fail (errno EINVAL). */
    if (!c || !out || (stream != 1 && stream != 2)) {
        errno = EINVAL;
        return -1;
    }
    int s = stream - 1;
    size_t head = c->head_len[s];
    size_t tail = ring_collect(c, (unsigned char)stream, NULL);
    uint64_t n = c->stream_total[s];

    char marker[256];
    size_t mlen = 0;
    if (n > (uint64_t)head + tail) {
        int m = snprintf(marker, sizeof marker,
                         "\n\n[command %s truncated by the global output limit: retained "
                         "the first %zu and last %zu of %llu bytes]\n\n",
                         stream == 1 ? "stdout" : "stderr", head, tail,
                         (unsigned long long)n);
        if (m < 0 || (size_t)m >= sizeof marker) {
            errno = EOVERFLOW; /* cannot happen: three integers fit easily */
            return -1;
        }
        mlen = (size_t)m;
    }

    /* raw = head + marker + tail; decoding needs the whole sequence at once so that a
     * character split across chunks (or between head and tail) is judged as a whole. */
    size_t raw_len = head + mlen + tail;
    char *raw = malloc(raw_len + 1);
    if (!raw)
        return -1;
    memcpy(raw, c->head[s], head);
    memcpy(raw + head, marker, mlen);
    ring_collect(c, (unsigned char)stream, raw + head + mlen);

    char *text = a3s_utf8_lossy(raw, raw_len, out_len);
    if (!text) {
        free(raw);
        return -1;
    }
    if (rest) {
        size_t rl = raw_len - head;
        char *r = malloc(rl + 1);
        if (!r) {
            free(text);
            free(raw);
            return -1;
        }
        memcpy(r, raw + head, rl);
        r[rl] = '\0';
        *rest = r;
        if (rest_len)
            *rest_len = rl;
    }
    free(raw);
    *out = text;
    return 0;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when invalid; on 0, *bad is the
 * length of the maximal invalid subpart (>= 1), which becomes one U+FFFD. This is the
 * Unicode "substitution of maximal subparts" practice that Rust's from_utf8_lossy uses. */
static size_t utf8_seq(const unsigned char *p, size_t avail, size_t *bad)
{
    unsigned char b0 = p[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (b0 < 0x80)
        return 1;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 2;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 3;
        if (b0 == 0xE0)
            lo = 0xA0; /* no overlongs */
        else if (b0 == 0xED)
            hi = 0x9F; /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 4;
        if (b0 == 0xF0)
            lo = 0x90; /* no overlongs */
        else if (b0 == 0xF4)
            hi = 0x8F; /* nothing above U+10FFFF */
    } else {
        *bad = 1; /* stray continuation, C0/C1 overlong lead, or F5..FF */
        return 0;
    }
    for (size_t i = 1; i < need; i++) {
        unsigned char l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (i >= avail || p[i] < l || p[i] > h) {
            *bad = i;
            return 0;
        }
    }
    return need;
}

/* Decode into dst (NULL: only measure); returns the output length. */
static size_t utf8_lossy_into(const unsigned char *src, size_t len, char *dst)
{
    size_t i = 0, o = 0;
    while (i < len) {
        /* ASCII fast path: the common case for command output. */
        size_t j = i;
        while (j < len && src[j] < 0x80)
            j++;
        if (j > i) {
            if (dst)
                memcpy(dst + o, src + i, j - i);
            o += j - i;
            i = j;
            continue;
        }
        size_t bad = 0, n = utf8_seq(src + i, len - i, &bad);
        if (n) {
            if (dst)
                memcpy(dst + o, src + i, n);
            o += n;
            i += n;
        } else {
            if (dst)
                memcpy(dst + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad;
        }
    }
    return o;
}

char *a3s_utf8_lossy(const char *data, size_t len, size_t *out_len)
{
    if (!data && len) {
        errno = EINVAL;
        return NULL;
    }
    const unsigned char *src = (const unsigned char *)data;
    /* Measure first: the worst case (3x) would be wasteful for large budgets. */
    size_t n = len ? utf8_lossy_into(src, len, NULL) : 0;
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    if (len)
        utf8_lossy_into(src, len, out);
    out[n] = '\0';
    if (out_len)
        *out_len = n;
    return out;
}
