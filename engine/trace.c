/* The tracing build's phase marks (trace.h). */
#include "trace.h"

#ifdef A3S_TRACE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

void a3s_trace_mark(const char *phase)
{
    static int on = -1;
    static struct timespec t0;
    if (on < 0) {
        on = getenv("A3S_SANDBOX_TRACE") != NULL;
        clock_gettime(CLOCK_MONOTONIC, &t0);
    }
    if (!on)
        return;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double ms = (double)(t.tv_sec - t0.tv_sec) * 1e3 + (double)(t.tv_nsec - t0.tv_nsec) / 1e6;
    char line[160];
    int n = snprintf(line, sizeof line, "a3s-trace %.3f %s\n", ms, phase);
    if (n > 0)
        (void)!write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}
#else
/* Not a tracing build: trace.h's marks are empty inline functions. */
typedef int a3s_trace_unused;
#endif
