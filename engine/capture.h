/* The global head+tail output budget shared by stdout and stderr.
 *
 * head = min(budget/2, 64 KiB) bytes, the first ones seen across both streams in arrival
 * order; tail = a ring of the last (budget - head) bytes; every byte remembers its
 * stream. truncated = total > budget (exactly at the limit is not truncated). */
#ifndef A3S_CAPTURE_H
#define A3S_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct a3s_capture a3s_capture;

a3s_capture *a3s_capture_new(size_t budget); /* NULL on ENOMEM or budget 0 */
void a3s_capture_free(a3s_capture *c);

/* Account and keep `len` bytes of `stream` (1 stdout, 2 stderr). Returns how many
 * leading bytes of this chunk went into the head. */
size_t a3s_capture_feed(a3s_capture *c, int stream, const char *data, size_t len);

uint64_t a3s_capture_total(const a3s_capture *c);    /* all bytes seen */
uint64_t a3s_capture_captured(const a3s_capture *c); /* head + tail bytes kept */
bool a3s_capture_truncated(const a3s_capture *c);

/* Render one stream: its head bytes, then - only if that stream lost bytes - the marker
 *   "\n\n[command <stdout|stderr> truncated by the global output limit: retained the
 *    first H and last T of N bytes]\n\n"
 * (H, T, N for that stream), then its tail bytes. `*out` (NUL-terminated, malloc'd) is
 * the whole rendering decoded as lossy UTF-8 (invalid sequences become U+FFFD); `*rest`
 * (optional, malloc'd, raw bytes) is the part after the head: marker + tail.
 * Returns 0 or -1 on ENOMEM. */
int a3s_capture_render(const a3s_capture *c, int stream, char **out, size_t *out_len,
                       char **rest, size_t *rest_len);

/* The head bytes kept for one stream (raw, in the capture); returns their length. */
size_t a3s_capture_head(const a3s_capture *c, int stream, const char **p);

/* Lossy UTF-8 decoding of arbitrary bytes (malloc'd, NUL-terminated). */
char *a3s_utf8_lossy(const char *data, size_t len, size_t *out_len);

#endif
