/* The aliases of a host path (a3s_aliases_of, bindings/lua/aliases.c), from this
 * process's real mount table, in a private mount namespace of its own (root only: it
 * skips, 77, otherwise). Checked: a bind mount of the path itself, of a directory
 * holding it, of a directory inside it, under an escaped name; a mount of it inside
 * itself, a covered mount and a namespace file bound somewhere are not named; a path on
 * a mount that covers another mount is looked up on the one on top; a missing path has
 * none; a table that cannot be read or understood is an error; the mount points below
 * a path are listed. TAP output. */
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aliases.h"
#include "tap.h"

static char base[] = "/tmp/a3s-test-aliases-XXXXXX";

static const char *at(const char *rel, char *buf)
{
    snprintf(buf, PATH_MAX, "%s/%s", base, rel);
    return buf;
}

static int mk(const char *rel)
{
    char p[PATH_MAX];
    return mkdir(at(rel, p), 0755);
}

static int bind(const char *from_rel, const char *to_rel)
{
    char a[PATH_MAX], b[PATH_MAX];
    return mount(at(from_rel, a), at(to_rel, b), NULL, MS_BIND, NULL);
}

/* The answer for rel as one string, entries separated by ',' (base written "B"). */
static const char *answer(const char *rel, const char *table, int *rc)
{
    char p[PATH_MAX];
    char *out = NULL;
    size_t len = 0;
    *rc = a3s_aliases_of(at(rel, p), table, &out, &len);
    static char text[8 * PATH_MAX];
    text[0] = '\0';
    for (size_t i = 0; out && i < len; i += strlen(out + i) + 1) {
        const char *a = out + i;
        if (i)
            strcat(text, ",");
        if (strncmp(a, base, strlen(base)) == 0) {
            strcat(text, "B");
            a += strlen(base);
        }
        strcat(text, a);
    }
    free(out);
    return text;
}

int main(void)
{
    if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        printf("1..0 # SKIP needs root and a mount namespace of its own\n");
        return 77;
    }
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    char p[PATH_MAX];
    int rc, setup = 0;
    const char *dirs[] = {"real", "real/ws", "real/ws/sub", "real/ws/sub2", "other",
                          "with space", "with space/ws", "alias-of-real", "alias-of-ws",
                          "alias-of-sub", "covered", "t", "t-alias"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++)
        setup |= mk(dirs[i]);
    setup |= bind("real", "alias-of-real");   /* a directory holding ws */
    setup |= bind("real/ws", "alias-of-ws");  /* ws itself */
    setup |= bind("real/ws/sub", "alias-of-sub"); /* a directory inside ws */
    setup |= bind("real/ws", "with space/ws"); /* a name mountinfo escapes */
    setup |= bind("real/ws", "real/ws/sub2"); /* ws again, inside itself */
    setup |= bind("real/ws", "covered");      /* then covered by a tmpfs */
    setup |= mount("cover", at("covered", p), "tmpfs", 0, NULL);
    int nf = open(at("nsfile", p), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    setup |= nf < 0 || close(nf) < 0;
    setup |= mount("/proc/self/ns/net", at("nsfile", p), NULL, MS_BIND, NULL);
    ok(setup == 0, "setup: directories and mounts made");

    ok(strcmp(answer("real/ws", NULL, &rc),
              "B/alias-of-real/ws,B/alias-of-sub,B/alias-of-ws,B/with space/ws") == 0 &&
           rc == 0,
       "held, itself, inside, escaped; not inside itself, not covered, no namespace file "
       "(got '%s')",
       answer("real/ws", NULL, &rc));
    ok(strcmp(answer("real/ws/sub", NULL, &rc),
              "B/alias-of-real/ws/sub,B/alias-of-sub,B/alias-of-ws/sub,B/real/ws/sub2/sub,"
              "B/with space/ws/sub") == 0,
       "the directory inside, under each name (got '%s')", answer("real/ws/sub", NULL, &rc));
    /* The mount points below ws: the one inside it, whatever it shows. */
    a3s_mount_table *t = a3s_aliases_table(NULL);
    char *below = NULL;
    size_t blen = 0;
    ok(t && a3s_aliases_below(t, at("real/ws", p), &below, &blen) == 0 && below &&
           strcmp(below, at("real/ws/sub2", p)) == 0 && blen == strlen(below) + 1,
       "the mount points below ws: real/ws/sub2 only (got '%s')", below ? below : "");
    free(below);
    ok(t && a3s_aliases_below(t, at("other", p), &below, &blen) == 0 && !below && !blen,
       "none below a directory without mounts");
    a3s_aliases_table_free(t);
    ok(strcmp(answer("other", NULL, &rc), "") == 0 && rc == 0,
       "a directory no mount shows again: none");
    ok(strcmp(answer("missing", NULL, &rc), "") == 0 && rc == 0, "a missing path: none");

    /* t/b under a tmpfs at t/b, covered by another tmpfs at t: t/b is the upper one's. */
    setup = mount("lower", at("t", p), "tmpfs", 0, NULL) | mk("t/b");
    setup |= mount("lower-b", at("t/b", p), "tmpfs", 0, NULL);
    setup |= mount("upper", at("t", p), "tmpfs", 0, NULL) | mk("t/b") | bind("t", "t-alias");
    ok(setup == 0, "setup: a mount covering another");
    ok(strcmp(answer("t/b", NULL, &rc), "B/t-alias/b") == 0,
       "a path on the mount on top: its other names on that mount (got '%s')",
       answer("t/b", NULL, &rc));

    /* A table that cannot be read or understood: an error, never "no aliases". */
    char table[PATH_MAX];
    snprintf(table, sizeof table, "%s.mountinfo", base);
    FILE *f = fopen(table, "w");
    if (f) {
        fputs("this is not a mount table\n", f);
        fclose(f);
    }
    answer("real/ws", table, &rc);
    ok(rc == -1, "a malformed table: -1");
    unlink(table);
    answer("real/ws", table, &rc);
    ok(rc == -1, "an unreadable table: -1");
    /* The namespace's mounts go with it; the directories are removed here. */
    (void)umount2(at("t-alias", p), MNT_DETACH);
    for (int i = 0; i < 3; i++)
        (void)umount2(at("t", p), MNT_DETACH);
    const char *points[] = {"alias-of-real", "alias-of-ws", "alias-of-sub", "with space/ws",
                            "real/ws/sub2", "covered", "covered", "nsfile"};
    for (size_t i = 0; i < sizeof points / sizeof *points; i++)
        (void)umount2(at(points[i], p), MNT_DETACH);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        perror(cmd);
    return tap_done();
}
