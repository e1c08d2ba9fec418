/* The launcher's reading of its own mount table (/proc/self/mountinfo), for the setup
 * step's checks (setup.c). Internal to the launcher. */
#ifndef A3S_MOUNTINFO_H
#define A3S_MOUNTINFO_H

#include <stdbool.h>

/* One mount: its id, its parent's, its mount point (unescaped) and whether it is
 * read-only, nosuid and nodev (its per-mount options). */
typedef struct a3s_mountinfo {
    unsigned long long id, parent;
    const char *point;
    bool rdonly, nosuid, nodev;
} a3s_mountinfo;

/* Calls fn for each mount, in the table's order, until it returns nonzero (returned: fn
 * returns > 0). -1 with errno when the table cannot be read or a line is not one
 * (EPROTO). */
int a3s_mountinfo_each(int (*fn)(void *ud, const a3s_mountinfo *m), void *ud);

#endif
