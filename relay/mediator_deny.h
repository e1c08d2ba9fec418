/* The mediator's refusal records (the format and bounds are in mediator.h, at
 * a3s_mediator_serve). Refusals are counted exactly, but only the first `keep` and the
 * last `keep` are kept as records: a client looping on refused requests must neither grow
 * the record file without bound nor push the interesting records out of it. Not
 * thread-safe: the server calls these under its own lock. */
#ifndef A3S_MEDIATOR_DENY_H
#define A3S_MEDIATOR_DENY_H

#include <stdbool.h>
#include <stddef.h>

#define A3S_DENY_LINE_MAX 512 /* a record: the target is at most 253 + 9 bytes */
#define A3S_DENY_KEEP_DEFAULT 32
#define A3S_DENY_KEEP_MAX 1024
#define A3S_DENY_REASONS 32 /* distinct reasons counted by name (the code has about 15) */

typedef struct a3s_deny_line {
    unsigned long long seq; /* which refusal this slot holds */
    size_t len;             /* 0: empty (or it could not be formatted) */
    char text[A3S_DENY_LINE_MAX];
} a3s_deny_line;

typedef struct a3s_deny_log {
    size_t keep;
    unsigned long long total, kept_first;
    a3s_deny_line *ring;                  /* keep slots, refusal number seq in slot seq % keep */
    const char *reason[A3S_DENY_REASONS]; /* static strings, counted in count[] */
    unsigned long long count[A3S_DENY_REASONS];
    unsigned long long other; /* reasons beyond A3S_DENY_REASONS distinct ones */
    bool closed;              /* the summary is out: later refusals are not recorded */
} a3s_deny_log;

/* One record line (newline included) into out; its length, or 0 when it does not fit. */
size_t a3s_deny_format(char *out, size_t cap, const char *proto, const char *host, int port,
                       const char *reason);

/* Count one refusal (reason: a static string) and keep its line (len 0: none): the first
 * `keep` are written to fd as they happen, the rest go to the ring. */
void a3s_deny_log_add(a3s_deny_log *d, int fd, const char *line, size_t len,
                      const char *reason);

/* At stop: the last records not written yet, then the summary line, to fd (nothing when
 * fd < 0); later refusals are not recorded. */
void a3s_deny_log_close(a3s_deny_log *d, int fd);

#endif
