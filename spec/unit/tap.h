/* Minimal TAP helpers for the C unit tests: `ok(cond, fmt, ...)`, then
 * `return tap_done();` from main (exit 1 when anything failed). */
#ifndef A3S_TAP_H
#define A3S_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                              \
    do {                                                                           \
        int ok_c_ = (cond) ? 1 : 0;                                                \
        tap_n++;                                                                   \
        if (!ok_c_)                                                                \
            tap_failed++;                                                          \
        printf("%s %d - ", ok_c_ ? "ok" : "not ok", tap_n);                        \
        printf(__VA_ARGS__);                                                       \
        printf("\n");                                                              \
        if (!ok_c_)                                                                \
            printf("#   failed at %s:%d\n", __FILE__, __LINE__);                   \
        fflush(stdout);                                                            \
    } while (0)

#define ok_streq(a, b, what)                                                       \
    do {                                                                           \
        const char *sa_ = (a), *sb_ = (b);                                         \
        int eq_ = sa_ && sb_ && strcmp(sa_, sb_) == 0;                             \
        ok(eq_, "%s", what);                                                       \
        if (!eq_)                                                                  \
            printf("#   got:      '%s'\n#   expected: '%s'\n", sa_ ? sa_ : "(null)", \
                   sb_ ? sb_ : "(null)");                                          \
    } while (0)

static inline int tap_done(void)
{
    printf("1..%d\n", tap_n);
    if (tap_failed)
        printf("# %d of %d failed\n", tap_failed, tap_n);
    return tap_failed ? 1 : 0;
}

#endif
