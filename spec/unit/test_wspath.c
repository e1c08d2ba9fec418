/* The rule for links on the way to a root bound from the host (a3s_wspath_bind_links,
 * engine/wspath.c): spelled as it is (0); a link in a directory the caller can write
 * refuses (-1, naming the link); a link only in directories the caller cannot write is
 * followed (1). The last case needs a directory the caller cannot write: as root (who
 * can write every directory) it runs in a child that becomes nobody. TAP output. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "wspath.h"

#define NOBODY 65534

static char base[] = "/tmp/a3s-test-wspath-XXXXXX";

static int links_of(const char *rel, char *link)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    return a3s_wspath_bind_links(p, link, PATH_MAX);
}

int main(void)
{
    char link[PATH_MAX], want[PATH_MAX], p[PATH_MAX];
    if (!mkdtemp(base) || chmod(base, 0755) < 0) {
        ok(0, "setup: a temp dir");
        return tap_done();
    }
    snprintf(p, sizeof p, "%s/real", base);
    int setup = mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/real/data", base);
    setup |= mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/link", base);
    setup |= symlink("real", p);
    /* locked: a directory nobody cannot write, holding a link of its own. */
    snprintf(p, sizeof p, "%s/locked", base);
    setup |= mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/locked/in", base);
    setup |= symlink("../real", p);
    ok(setup == 0, "setup: real/data, link -> real, locked/in -> ../real");

    ok(links_of("real/data", link) == 0, "a path spelled as it is: 0");
    ok(links_of("real/missing/below", link) == 0, "a missing part ends the walk: 0");
    link[0] = '\0';
    snprintf(want, sizeof want, "%s/link", base);
    ok(links_of("link/data", link) == -1, "a link in a directory the caller can write: -1");
    ok_streq(link, want, "and the link is named");
    ok(links_of("link", link) == -1, "also when the link is the path itself");

    /* As nobody: base (0755, root's) cannot be written, so links in it are followed;
     * locked/in lies in locked (0755, root's) too. As a non-root caller the same. */
    if (geteuid() == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            if (setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
                _exit(2);
            int a = links_of("link/data", link), b = links_of("locked/in/data", link);
            _exit(a == 1 && b == 1 ? 0 : 1);
        }
        int st = 0;
        ok(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
           "links only in directories the caller cannot write: 1 (as nobody)");
    } else {
        ok(links_of("locked/in/data", link) == -1 || links_of("locked/in/data", link) == 1,
           "not root: a link in the caller's own directory refuses, else it is followed");
    }

    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf %s", base);
    (void)!system(cmd);
    return tap_done();
}
