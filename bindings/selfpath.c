/* How the running program was reached (selfpath.h). */
#include "selfpath.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The main program as its caller named it: argv[0] from /proc/self/cmdline; when it has
 * no '/', every PATH candidate execvp would try up to the one found (an earlier one a
 * command creates would be what runs next). */
int a3s_selfpath_invoked(a3s_strv *out)
{
    char buf[PATH_MAX];
    FILE *f = fopen("/proc/self/cmdline", "rbe");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    (void)fclose(f);
    buf[n] = '\0';
    if (!buf[0])
        return 0;
    if (strchr(buf, '/'))
        return a3s_strv_push(out, buf);
    const char *path = getenv("PATH");
    for (const char *p = path ? path : ""; *p;) {
        size_t len = strcspn(p, ":");
        if (a3s_strv_pushf(out, "%.*s/%s", (int)(len ? len : 1), len ? p : ".", buf) < 0)
            return -1;
        struct stat st;
        const char *cand = out->v[out->n - 1];
        if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
            break;
        p += len;
        if (*p == ':')
            p++;
    }
    return 0;
}
