/* Unit tests for backends/linux/pinstash.c through pin.c: placeholders kept between runs
 * of one workspace and moved back into it, never into another workspace, never with
 * anything put into them meanwhile, never when the state directory is on another
 * filesystem; unusable kept entries are removed, not used. */
#include <sys/stat.h>
#include <sys/xattr.h>

#include "pin_fixture.h"

/* Kept placeholders in the state directory. */
static size_t kept_files(void)
{
    DIR *d = opendir(state_dir);
    size_t n = 0;
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));)
        n += strstr(de->d_name, ".keep-") != NULL;
    closedir(d);
    return n;
}

/* The path of the entry kept for workspace ws whose name ends with `tail`, into out. */
static bool kept_name(const char *ws, const char *tail, char *out)
{
    struct stat st;
    char head[64];
    if (stat(ws, &st) < 0)
        return false;
    snprintf(head, sizeof head, "ws-%llx-%llx.keep-", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    DIR *d = opendir(state_dir);
    bool found = false;
    if (!d)
        return false;
    size_t tl = strlen(tail), hl = strlen(head);
    for (struct dirent *de; (de = readdir(d)) && !found;) {
        size_t l = strlen(de->d_name);
        if (!strncmp(de->d_name, head, hl) && l > tl && !strcmp(de->d_name + l - tl, tail)) {
            fmt_path(out, "%s/%s", state_dir, de->d_name);
            found = true;
        }
    }
    closedir(d);
    return found;
}

static ino_t ino_at(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 ? st.st_ino : 0;
}

static void cycle(const char *ws, const a3s_strv *d, const a3s_strv *f, ino_t *git, ino_t *rc,
                  const char *what)
{
    a3s_pins *p = NULL;
    a3s_error err = {0};
    ok(acq(ws, d, f, &p, &err) == 0 && npaths(p) == 2, "%s: acquire: %s", what, err.msg);
    *git = ino_at(ws, ".git");
    *rc = ino_at(ws, ".bashrc");
    ok(is_dir(ws, ".git") && mode_of(ws, ".git") == 0700 && is_reg(ws, ".bashrc") &&
           mode_of(ws, ".bashrc") == 0600,
       "%s: a directory 0700 and a file 0600", what);
    char p2[PATH_MAX];
    path_of(p2, ws, ".git");
    ok(count_entries(p2) == 0, "%s: the directory is empty", what);
    a3s_pins_release(p);
    ok(count_entries(ws) == 0, "%s: the release leaves nothing in the workspace", what);
}

static void test_reused(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "reuse");
    a3s_strv d = names(".git", NULL), f = names(".bashrc", NULL);
    size_t before = kept_files();
    ino_t g1, r1, g2, r2;
    cycle(ws, &d, &f, &g1, &r1, "first run");
    ok(kept_files() == before + 2, "both placeholders are kept in the state directory");
    cycle(ws, &d, &f, &g2, &r2, "second run");
    ok(g1 == g2 && r1 == r2, "the second run's placeholders are the first run's inodes");
    ok(state_files("") == 0, "no record is left");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* Another workspace, or a new directory where the workspace was, gets its own. */
static void test_per_workspace(void)
{
    char a[PATH_MAX], b[PATH_MAX];
    new_ws(a, "own-a");
    new_ws(b, "own-b");
    a3s_strv d = names(".git", NULL), f = names(".bashrc", NULL);
    ino_t ga, ra, gb, rb;
    cycle(a, &d, &f, &ga, &ra, "workspace A");
    cycle(b, &d, &f, &gb, &rb, "workspace B");
    ok(ga != gb && ra != rb, "B does not get A's placeholders");
    if (rmdir(a) < 0 || mkdir(a, 0755) < 0)
        exit(2);
    ino_t g2, r2;
    cycle(a, &d, &f, &g2, &r2, "a new directory at A's path");
    ok(g2 != ga && r2 != ra, "it does not get the old A's placeholders");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* A descriptor opened on a placeholder while it was in the workspace (a host process, or
 * a concurrent run whose policy does not protect the name) writes into it once kept: the
 * next run must not get that content. */
static void test_old_descriptor(void)
{
    char ws[PATH_MAX], p[PATH_MAX];
    new_ws(ws, "oldfd");
    a3s_strv d = names(".git", NULL), f = names(".bashrc", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    path_of(p, ws, ".git");
    int dfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    path_of(p, ws, ".bashrc");
    int ffd = open(p, O_RDWR | O_CLOEXEC);
    a3s_pins_release(pins);
    ok(count_entries(ws) == 0 && kept_files() >= 2, "released and kept");
    int h = openat(dfd, "hooks", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    ok(h >= 0 && write(h, "#!/bin/sh\n", 10) == 10, "the old directory descriptor plants a file");
    ok(ffd >= 0 && write(ffd, "evil\n", 5) == 5, "the old file descriptor writes");
    if (h >= 0)
        close(h);
    pins = NULL;
    ok(acq(ws, &d, &f, &pins, &err) == 0 && npaths(pins) == 2, "the next acquire: %s", err.msg);
    path_of(p, ws, ".git");
    ok(is_dir(ws, ".git") && count_entries(p) == 0, "its .git is an empty directory");
    struct stat st;
    path_of(p, ws, ".bashrc");
    ok(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0,
       "its .bashrc an empty file");
    a3s_pins_release(pins);
    ok(count_entries(ws) == 0, "and the workspace is clean after it");
    /* Written after the move into the stash: never moved back in either. */
    pins = NULL;
    ok(acq(ws, &d, &f, &pins, &err) == 0, "once more: %s", err.msg);
    path_of(p, ws, ".git");
    int dfd2 = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    a3s_pins_release(pins);
    ok(dfd2 >= 0 && mkdirat(dfd2, "hooks", 0755) == 0, "a directory made in a kept one");
    pins = NULL;
    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    path_of(p, ws, ".git");
    ok(count_entries(p) == 0, "is not brought back (%zu entries)", count_entries(p));
    a3s_pins_release(pins);
    close(dfd);
    if (dfd2 >= 0)
        close(dfd2);
    if (ffd >= 0)
        close(ffd);
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* A pin changed during the run is left where it is (as without the stash), not kept. */
static void test_touched_not_kept(void)
{
    char ws[PATH_MAX], p[PATH_MAX];
    new_ws(ws, "touched");
    a3s_strv d = names(".git", NULL), f = names(".bashrc", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    size_t before = kept_files();
    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    path_of(p, ws, ".git");
    ok(chmod(p, 0755) == 0, "its .git is chmod'ed meanwhile");
    a3s_pins_release(pins);
    ok(is_dir(ws, ".git") && absent(ws, ".bashrc"), "the changed one stays, the other goes");
    ok(kept_files() == before + 1, "only the untouched one is kept");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* What is found under a kept entry's name and is not an empty placeholder of ours is
 * removed and never used. */
static void test_unusable_entries(void)
{
    char ws[PATH_MAX], k[PATH_MAX], p[PATH_MAX];
    new_ws(ws, "unusable");
    a3s_strv d = names(".git", NULL), f = names(".bashrc", NULL);
    ino_t g, r;
    cycle(ws, &d, &f, &g, &r, "first run");
    (void)g;
    (void)r;
    /* 2e676974 = ".git", 2e626173687263 = ".bashrc" */
    ok(kept_name(ws, "-d-2e676974", k), "the kept .git");
    char target[PATH_MAX];
    new_ws(target, "unusable-target");
    ok(rmdir(k) == 0 && symlink(target, k) == 0, "is replaced by a symlink to a directory");
    char kf[PATH_MAX];
    ok(kept_name(ws, "-f-2e626173687263", kf), "the kept .bashrc");
    ok(chmod(kf, 0644) == 0, "is made 0644");
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(acq(ws, &d, &f, &pins, &err) == 0 && npaths(pins) == 2, "acquire: %s", err.msg);
    struct stat st;
    path_of(p, ws, ".git");
    ok(lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && mode_of(ws, ".git") == 0700,
       "a .git directory, 0700");
    ok(is_reg(ws, ".bashrc") && mode_of(ws, ".bashrc") == 0600, "a .bashrc file, 0600");
    ok(count_entries(target) == 0, "the symlink's target got nothing");
    ok(lstat(k, &st) < 0 && lstat(kf, &st) < 0, "both unusable entries are gone");
    a3s_pins_release(pins);
    /* A kept directory with something in it (put there by this user on the host). */
    ok(kept_name(ws, "-d-2e676974", k), "kept again");
    fmt_path(p, "%s/x", k);
    ok(mkdir(p, 0700) == 0, "a directory is made in it");
    pins = NULL;
    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    path_of(p, ws, ".git");
    ok(count_entries(p) == 0, "the workspace's .git is empty");
    ok(lstat(k, &st) < 0, "the kept one is gone, content and all");
    a3s_pins_release(pins);
    ok(count_entries(ws) == 0, "clean");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* The state directory on another filesystem: nothing can be moved there; the pins are
 * made and removed as before. */
static void test_other_filesystem(void)
{
    char other[PATH_MAX], ws[PATH_MAX], sd[PATH_MAX];
    struct stat a, b;
    fmt_path(other, "/dev/shm/a3s-test-pinstash-%ld", (long)getpid());
    if (mkdir(other, 0700) < 0 || stat(other, &a) < 0 || stat(root, &b) < 0 ||
        a.st_dev == b.st_dev) {
        ok(1, "# SKIP no other filesystem at /dev/shm");
        rmdir(other);
        return;
    }
    new_ws(ws, "otherfs");
    a3s_strv d = names(".git", NULL), f = names(".bashrc", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(a3s_pins_acquire_in(other, -1, ws, &d, &f, &pins, &err) == 0 && npaths(pins) == 2,
       "acquire with the state on another filesystem: %s", err.msg);
    a3s_pins_release(pins);
    fmt_path(sd, "%s/a3s-sandbox-state-%lu", other, (unsigned long)geteuid());
    ok(count_entries(ws) == 0 && count_entries(sd) == 0,
       "the workspace and that state directory are left empty");
    nftw(other, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* The sweep keeps recently used entries. */
static void test_sweep_keeps_recent(void)
{
    size_t n = kept_files();
    a3s_pins_sweep(state_root);
    ok(n > 0 && kept_files() == n, "a sweep leaves recently kept placeholders (%zu)", n);
}

int main(void)
{
    if (pin_fixture_init() != 0)
        return 2;
    test_reused();
    test_per_workspace();
    test_old_descriptor();
    test_touched_not_kept();
    test_unusable_entries();
    test_other_filesystem();
    test_sweep_keeps_recent();
    pin_fixture_done();
    return tap_done();
}
