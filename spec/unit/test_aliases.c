/* The aliases of a host path (a3s_aliases_of, bindings/lua/aliases.c), read from a
 * mount table written here. No mounts are made: each "mount point" of the table is a
 * symbolic link to the directory it should show, so stat sees what a bind mount would
 * show there; one that shows something else stands for a mount covered by another.
 * Checked: a mount of the path itself, of a directory holding it, of a directory inside
 * it; mount points inside the path, covered mounts and other devices are not named;
 * escaped names; a missing path; an unreadable or malformed table. TAP output. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "aliases.h"
#include "tap.h"

static char base[] = "/tmp/a3s-test-aliases-XXXXXX";
static char table[PATH_MAX + 32];

static void mk(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    if (mkdir(p, 0755) < 0)
        perror(p);
}

static void link_to(const char *target_rel, const char *rel)
{
    char t[PATH_MAX], p[PATH_MAX];
    snprintf(t, sizeof t, "%s/%s", base, target_rel);
    snprintf(p, sizeof p, "%s/%s", base, rel);
    if (symlink(t, p) < 0)
        perror(p);
}

/* The table: "/" of this device at "/", another device's mount, then one mount of this
 * device per pair {root, point} (relative to base; a point may be escaped). */
static void write_table(const char *const pairs[][2], size_t n)
{
    struct stat st;
    FILE *f = fopen(table, "w");
    if (!f || stat(base, &st) < 0) {
        perror(table);
        exit(1);
    }
    unsigned maj = major(st.st_dev), min = minor(st.st_dev);
    fprintf(f, "1 0 %u:%u / / rw - ext4 /dev/x rw\n", maj, min);
    /* Another device's mount, at a path inside base: never named. */
    fprintf(f, "2 1 %u:%u %s/real %s/otherdev rw - ext4 /dev/y rw\n", maj + 1, min, base, base);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%zu 1 %u:%u %s/%s %s/%s rw - ext4 /dev/x rw\n", i + 3, maj, min, base,
                pairs[i][0], base, pairs[i][1]);
    fclose(f);
}

/* The answer for rel as one string, entries separated by ',' (base shortened to "B"). */
static char *answer(const char *rel, int *rc)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    char *out = NULL;
    size_t len = 0;
    *rc = a3s_aliases_of(p, table, &out, &len);
    static char text[4 * PATH_MAX];
    text[0] = '\0';
    for (size_t at = 0; out && at < len; at += strlen(out + at) + 1) {
        const char *a = out + at;
        if (at)
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
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(table, sizeof table, "%s.mountinfo", base);
    mk("real");
    mk("real/ws");
    mk("real/ws/sub");
    mk("other");
    mk("with space");
    link_to("real", "alias-of-real");        /* a mount of a directory holding ws */
    link_to("real/ws", "alias-of-ws");       /* a mount of ws itself */
    link_to("real/ws/sub", "alias-of-sub");  /* a mount of a directory inside ws */
    link_to("other", "covered");             /* listed as ws, shows something else */
    link_to("real/ws", "with space/ws");     /* an escaped mount point */
    int rc;
    /* Each line: id parent maj:min root point ...; %s is base. */
    static const char *const first[][2] = {
        {"real", "alias-of-real"}, {"real/ws", "alias-of-ws"}, {"real/ws/sub", "alias-of-sub"}};
    write_table(first, 3);
    ok(strcmp(answer("real/ws", &rc), "B/alias-of-real/ws,B/alias-of-sub,B/alias-of-ws") == 0 &&
           rc == 0,
       "a mount of a directory holding it, of it, of a directory inside it (got '%s')",
       answer("real/ws", &rc));
    ok(strcmp(answer("real/ws/sub", &rc), "B/alias-of-real/ws/sub,B/alias-of-sub,B/alias-of-ws/sub") == 0,
       "the directory inside, under each name (got '%s')", answer("real/ws/sub", &rc));
    ok(strcmp(answer("other", &rc), "") == 0 && rc == 0, "a directory no mount shows again: none");
    ok(strcmp(answer("missing", &rc), "") == 0 && rc == 0, "a missing path: none");

    /* A mount point inside the path itself is the path's own business; a covered mount
     * (its point shows something else now) is not named. */
    static const char *const second[][2] = {
        {"real/ws", "real/ws/sub"}, {"real/ws", "covered"}, {"real/ws", "with\\040space/ws"}};
    write_table(second, 3);
    ok(strcmp(answer("real/ws", &rc), "B/with space/ws") == 0,
       "inside itself and covered: not named; \\040 read as a space (got '%s')",
       answer("real/ws", &rc));

    /* A table that cannot be read or understood: an error, never "no aliases". */
    FILE *f = fopen(table, "w");
    fputs("this is not a mount table\n", f);
    fclose(f);
    answer("real/ws", &rc);
    ok(rc == -1, "a malformed table: -1");
    unlink(table);
    answer("real/ws", &rc);
    ok(rc == -1, "an unreadable table: -1");
    char *out = NULL;
    size_t len = 0;
    ok(a3s_aliases_of("/", NULL, &out, &len) == 0, "this host's own table is read");
    free(out);

    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        perror(cmd);
    return tap_done();
}
