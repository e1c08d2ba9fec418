/* The launcher's own mount table (mountinfo.h). */
#include "mountinfo.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where field k (0-based) of a space-separated line starts; NULL if absent. */
static char *field(char *line, int k)
{
    char *p = line;
    for (int i = 0; i < k && p; i++) {
        char *sp = strchr(p, ' ');
        p = sp ? sp + 1 : NULL;
    }
    return p;
}

static bool has_opt(const char *opts, const char *o)
{
    size_t n = strlen(o);
    for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, o, n) && (p[n] == ',' || p[n] == '\0'))
            return true;
    return false;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo: undone in place. */
static void unescape(char *s)
{
    char *o = s;
    for (const char *q = s; *q; q++, o++)
        if (q[0] == '\\' && q[1] >= '0' && q[1] <= '3' && q[2] >= '0' && q[2] <= '7' &&
            q[3] >= '0' && q[3] <= '7') {
            *o = (char)((q[1] - '0') * 64 + (q[2] - '0') * 8 + (q[3] - '0'));
            q += 3;
        } else {
            *o = *q;
        }
    *o = '\0';
}

int a3s_mountinfo_each(int (*fn)(void *ud, const a3s_mountinfo *m), void *ud)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && getline(&line, &cap, f) > 0) {
        /* "ID PARENT MAJ:MIN ROOT POINT OPTIONS ...": no fixed buffer (an escaped name
         * takes four bytes a character). */
        a3s_mountinfo m;
        char *point = field(line, 4), *opts = field(line, 5), *end;
        if (sscanf(line, "%llu %llu", &m.id, &m.parent) != 2 || !point || !opts ||
            !(end = strchr(point, ' ')) || !strchr(opts, ' ')) {
            errno = EPROTO;
            rc = -1;
            break;
        }
        *end = '\0';
        *strchr(opts, ' ') = '\0';
        unescape(point);
        m.point = point;
        m.rdonly = has_opt(opts, "ro");
        m.nosuid = has_opt(opts, "nosuid");
        m.nodev = has_opt(opts, "nodev");
        rc = fn(ud, &m);
    }
    if (rc == 0 && ferror(f)) {
        errno = EIO;
        rc = -1;
    }
    free(line);
    fclose(f);
    return rc;
}
