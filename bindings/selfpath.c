/* How the running program was reached (selfpath.h). */
#include "selfpath.h"

#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One PATH entry (p[0..len)) as a directory: empty is the current directory, and a
 * leading "~" or "~user" is expanded as bash expands it in PATH (execvp does not: an
 * extra candidate is only one more protected name). Appends ENTRY/name to out. */
static int push_candidate(a3s_strv *out, const char *p, size_t len, const char *name)
{
    if (len == 0)
        return a3s_strv_pushf(out, "./%s", name);
    if (p[0] == '~') {
        size_t ulen = strcspn(p + 1, "/:");
        const char *home = NULL;
        if (ulen == 0) {
            home = getenv("HOME");
        } else if (ulen < 256) {
            char user[256];
            memcpy(user, p + 1, ulen);
            user[ulen] = '\0';
            struct passwd *pw = getpwnam(user);
            home = pw ? pw->pw_dir : NULL;
        }
        if (home && home[0]) {
            /* Both spellings: the shell's expansion, and the entry as a literal name. */
            if (a3s_strv_pushf(out, "%s%.*s/%s", home, (int)(len - 1 - ulen), p + 1 + ulen,
                               name) < 0)
                return -1;
        }
    }
    return a3s_strv_pushf(out, "%.*s/%s", (int)len, p, name);
}

/* The main program as its caller named it: argv[0] from /proc/self/cmdline; when it has
 * no '/', every PATH candidate a shell or execvp would try up to the one found (an
 * earlier one a command creates would be what runs next). Without PATH, the defaults of
 * GNU libc's execvp and of bash, and the current directory. */
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
    if (!path)
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:.";
    for (const char *p = path;;) {
        size_t len = strcspn(p, ":"), before = out->n;
        if (push_candidate(out, p, len, buf) < 0)
            return -1;
        bool found = false;
        for (size_t i = before; i < out->n && !found; i++) {
            struct stat st;
            const char *cand = out->v[i];
            found = stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0;
        }
        if (found || p[len] == '\0')
            break; /* a trailing ':' is one more (empty) entry: the loop sees it */
        p += len + 1;
    }
    return 0;
}
