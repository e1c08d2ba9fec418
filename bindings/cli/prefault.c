/* Copy-on-write faults taken ahead of time (prefault.h). */
#include "prefault.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* Larger mappings are reservations more than data (an allocator's arena, a sanitizer's
 * shadow): making them resident would cost memory, not save faults. */
#define PREFAULT_MAX_MAPPING (16u << 20)

void a3s_prefault_writable(void)
{
#ifndef A3S_UNDER_ASAN /* its shadow memory is one huge writable mapping */
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* A line longer than the buffer (a long file name): its start is enough. */
        if (!strchr(line, '\n')) {
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {
            }
        }
        uintmax_t lo, hi;
        char perms[5];
        if (sscanf(line, "%jx-%jx %4s", &lo, &hi, perms) != 3)
            continue;
        /* Private and writable: the pages a fork shares until written. */
        if (strcmp(perms, "rw-p") != 0 || hi <= lo || hi - lo > PREFAULT_MAX_MAPPING)
            continue;
        (void)madvise((void *)(uintptr_t)lo, (size_t)(hi - lo), MADV_POPULATE_WRITE);
    }
    fclose(f);
#endif
}
