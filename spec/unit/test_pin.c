/* Unit tests for backends/linux/pin.c: placeholders for missing protected workspace entries. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pin.h"
#include "stale.h"
#include "tap.h"

static char root[PATH_MAX];
static char state_root[PATH_MAX]; /* holds a3s-sandbox-state-<euid> for these tests */
static char state_dir[PATH_MAX];

/* ---------------------------------------------------------------- fixtures */

/* snprintf into a PATH_MAX buffer; a truncated test path is a broken test. */
static void fmt_path(char *out, const char *fmt, ...) A3S_PRINTF(2, 3);
static void fmt_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "test path too long\n");
        exit(2);
    }
}

static void path_of(char *out, const char *ws, const char *name)
{
    fmt_path(out, "%s/%s", ws, name);
}

/* A fresh, empty workspace directory under the test root. */
static void new_ws(char *ws, const char *tag)
{
    static int seq;
    fmt_path(ws, "%s/ws-%s-%d", root, tag, ++seq);
    if (mkdir(ws, 0755) < 0) {
        perror(ws);
        exit(2);
    }
}

static bool is_dir(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_reg(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static bool absent(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) < 0 && errno == ENOENT;
}

static mode_t mode_of(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 ? (st.st_mode & 07777) : (mode_t)-1;
}

static void write_file(const char *ws, const char *name, const char *text)
{
    char p[PATH_MAX];
    path_of(p, ws, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) < 0) {
        perror(p);
        exit(2);
    }
}

static void make_dir(const char *ws, const char *name)
{
    char p[PATH_MAX];
    path_of(p, ws, name);
    if (mkdir(p, 0755) < 0) {
        perror(p);
        exit(2);
    }
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d)
        return (size_t)-1;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static int count_fds(void)
{
    return (int)count_entries("/proc/self/fd");
}

/* A NULL-terminated list of names as an a3s_strv (caller frees). */
static a3s_strv names(const char *first, ...)
{
    a3s_strv sv = {0};
    va_list ap;
    va_start(ap, first);
    for (const char *n = first; n; n = va_arg(ap, const char *))
        if (a3s_strv_push(&sv, n) < 0)
            exit(2);
    va_end(ap);
    return sv;
}

static size_t npaths(const a3s_pins *pins)
{
    size_t n = 0;
    for (char *const *p = a3s_pins_paths(pins); *p; p++)
        n++;
    return n;
}

static bool has_path(const a3s_pins *pins, const char *ws, const char *name)
{
    char want[PATH_MAX];
    path_of(want, ws, name);
    for (char *const *p = a3s_pins_paths(pins); *p; p++)
        if (strcmp(*p, want) == 0)
            return true;
    return false;
}

static bool held(const char *ws, const char *name)
{
    int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool h = a3s_pins_held(fd, state_root, name);
    close(fd);
    return h;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(p);
}

static int acq(const char *ws, const a3s_strv *d, const a3s_strv *f, a3s_pins **out, a3s_error *err)
{
    return a3s_pins_acquire_in(state_root, -1, ws, d, f, out, err);
}

/* ---------------------------------------------------------------- tests */

static void test_create_and_remove(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "basic");
    a3s_strv d = names(".git", ".a3s", NULL), f = names(".mcp.json", ".bashrc", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};

    ok(acq(ws, &d, &f, &pins, &err) == 0 && pins, "acquire creates pins: %s", err.msg);
    ok(is_dir(ws, ".git") && is_dir(ws, ".a3s"), "directory pins exist");
    ok(is_reg(ws, ".mcp.json") && is_reg(ws, ".bashrc"), "file pins exist");
    ok(mode_of(ws, ".git") == 0700, "directory pin mode 0700 (got %o)", mode_of(ws, ".git"));
    ok(mode_of(ws, ".mcp.json") == 0600, "file pin mode 0600 (got %o)", mode_of(ws, ".mcp.json"));
    ok(npaths(pins) == 4, "four paths held (got %zu)", npaths(pins));
    ok(has_path(pins, ws, ".git") && has_path(pins, ws, ".a3s") &&
           has_path(pins, ws, ".mcp.json") && has_path(pins, ws, ".bashrc"),
       "paths are absolute workspace paths");
    ok(held(ws, ".git") && held(ws, ".mcp.json"), "a3s_pins_held sees our pins");
    a3s_pins_release(pins);
    ok(absent(ws, ".git") && absent(ws, ".a3s") && absent(ws, ".mcp.json") && absent(ws, ".bashrc"),
       "release removes untouched pins");
    ok(count_entries(ws) == 0, "workspace is empty again");
    ok(!held(ws, ".git"), "a3s_pins_held is false after release");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_modified_kept(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "modified");
    a3s_strv d = names(".codex", ".idea", NULL), f = names(".zshrc", ".profile", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};

    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    write_file(ws, ".zshrc", "written");
    write_file(ws, ".codex/config", "x");
    a3s_pins_release(pins);
    ok(is_reg(ws, ".zshrc"), "a written file pin is kept");
    ok(is_dir(ws, ".codex") && is_reg(ws, ".codex/config"), "a non-empty directory pin is kept");
    ok(absent(ws, ".idea") && absent(ws, ".profile"), "untouched pins are removed");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_replaced_kept(void)
{
    char ws[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
    new_ws(ws, "replaced");
    a3s_strv d = names(".idea", NULL), f = names(".profile", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};

    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    /* Create the replacements while the pins exist, so the inodes differ. */
    write_file(ws, "profile.new", "");
    make_dir(ws, "idea.new");
    path_of(a, ws, "profile.new");
    path_of(b, ws, ".profile");
    ok(rename(a, b) == 0, "replace the file pin by another empty file");
    path_of(a, ws, "idea.new");
    path_of(b, ws, ".idea");
    ok(rename(a, b) == 0, "replace the directory pin by another empty directory");
    ok(!held(ws, ".profile") && !held(ws, ".idea"), "replaced pins are not held");
    a3s_pins_release(pins);
    ok(is_reg(ws, ".profile"), "a replaced file pin is kept");
    ok(is_dir(ws, ".idea"), "a replaced directory pin is kept");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_preexisting_untouched(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "pre");
    make_dir(ws, ".git");
    write_file(ws, ".mcp.json", "original");
    write_file(ws, ".ripgreprc", ""); /* empty: would look like a pin */
    a3s_strv d = names(".git", NULL), f = names(".mcp.json", ".ripgreprc", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};

    ok(acq(ws, &d, &f, &pins, &err) == 0, "acquire: %s", err.msg);
    ok(npaths(pins) == 0, "existing entries are not recorded (got %zu)", npaths(pins));
    ok(!held(ws, ".git") && !held(ws, ".ripgreprc"), "existing entries are not held");
    a3s_pins_release(pins);
    ok(is_dir(ws, ".git") && is_reg(ws, ".mcp.json") && is_reg(ws, ".ripgreprc"),
       "existing entries survive release");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_refcount_sequential(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "seq");
    a3s_strv d = names(".git", NULL), f = names(".mcp.json", NULL);
    a3s_pins *a = NULL, *b = NULL;
    a3s_error err = {0};

    ok(acq(ws, &d, &f, &a, &err) == 0, "first acquire: %s", err.msg);
    ok(acq(ws, &d, &f, &b, &err) == 0, "second acquire: %s", err.msg);
    ok(npaths(b) == 2 && has_path(b, ws, ".git") && has_path(b, ws, ".mcp.json"),
       "the second acquirer shares the existing pins");
    a3s_pins_release(a);
    ok(is_dir(ws, ".git") && is_reg(ws, ".mcp.json"), "pins survive the first release");
    a3s_pins_release(b);
    ok(absent(ws, ".git") && absent(ws, ".mcp.json"), "the last release removes them");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

struct racer {
    const char *ws;
    const a3s_strv *d, *f;
    pthread_barrier_t *start;
    a3s_pins *pins;
    int rc;
    a3s_error err;
};

static void *race_acquire(void *arg)
{
    struct racer *r = arg;
    pthread_barrier_wait(r->start);
    r->rc = acq(r->ws, r->d, r->f, &r->pins, &r->err);
    return NULL;
}

static void test_refcount_concurrent(void)
{
    a3s_strv d = names(".git", ".vscode", NULL), f = names(".mcp.json", NULL);
    int failures = 0;
    for (int round = 0; round < 50; round++) {
        char ws[PATH_MAX];
        new_ws(ws, "conc");
        pthread_barrier_t start;
        pthread_barrier_init(&start, NULL, 2);
        struct racer r[2] = {{ws, &d, &f, &start, NULL, -1, {0}},
                             {ws, &d, &f, &start, NULL, -1, {0}}};
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, race_acquire, &r[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
        pthread_barrier_destroy(&start);
        bool good =
            r[0].rc == 0 && r[1].rc == 0 && npaths(r[0].pins) == 3 && npaths(r[1].pins) == 3;
        a3s_pins_release(r[round % 2].pins);
        good = good && is_dir(ws, ".git") && is_dir(ws, ".vscode") && is_reg(ws, ".mcp.json");
        a3s_pins_release(r[1 - round % 2].pins);
        good = good && count_entries(ws) == 0;
        if (!good)
            failures++;
    }
    ok(failures == 0,
       "50 concurrent acquire pairs share pins; only the last release removes "
       "them (%d failed)",
       failures);
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_failure_cleans_up(void)
{
    char ws[PATH_MAX], longname[300];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    a3s_error err = {0};
    a3s_pins *pins = (a3s_pins *)&err; /* must be reset to NULL on failure */

    new_ws(ws, "fail-dir");
    a3s_strv d = names(".valid", longname, NULL);
    ok(acq(ws, &d, NULL, &pins, &err) < 0, "a name too long fails the acquire");
    ok(err.code == A3S_ERR_SETUP, "failure is A3S_ERR_SETUP (got %d)", err.code);
    ok(strstr(err.msg, "placeholder") != NULL, "message names the placeholder: %s", err.msg);
    ok(pins == NULL, "no pins returned on failure");
    ok(count_entries(ws) == 0, "the valid directory pin was removed again");
    a3s_strv_free(&d);

    new_ws(ws, "fail-file");
    d = names(".d1", ".d2", NULL);
    a3s_strv f = names(".f1", longname, NULL);
    ok(acq(ws, &d, &f, &pins, &err) < 0, "a file name too long fails");
    ok(count_entries(ws) == 0, "directory and file pins created before were removed");
    a3s_strv_free(&f);

    /* A failure must give back shared references without removing the other holder's. */
    new_ws(ws, "fail-shared");
    a3s_pins *first = NULL;
    a3s_strv g = names(".git", NULL);
    memset(&err, 0, sizeof err);
    ok(acq(ws, &g, NULL, &first, &err) == 0, "first holder: %s", err.msg);
    a3s_strv bad = names(".git", longname, NULL);
    pins = NULL;
    ok(acq(ws, &bad, NULL, &pins, &err) < 0, "second acquire fails");
    ok(is_dir(ws, ".git") && held(ws, ".git"), "the first holder's pin is still there");
    a3s_pins_release(first);
    ok(absent(ws, ".git"), "and goes away with its holder (reference count restored)");
    a3s_strv_free(&bad);
    a3s_strv_free(&g);
    a3s_strv_free(&d);

    new_ws(ws, "fail-invalid");
    static const char *const invalid[] = {"a/b", "..", ".", ""};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        a3s_strv v = names(".ok", invalid[i], NULL);
        int rc = acq(ws, &v, NULL, &pins, &err);
        ok(rc < 0 && count_entries(ws) == 0, "name '%s' is refused and nothing remains",
           invalid[i]);
        a3s_strv_free(&v);
    }
}

static void test_workspace_symlink_refused(void)
{
    char ws[PATH_MAX], link[PATH_MAX];
    new_ws(ws, "target");
    fmt_path(link, "%s/ws-link", root);
    ok(symlink(ws, link) == 0, "symlink to a workspace");
    a3s_strv d = names(".git", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(acq(link, &d, NULL, &pins, &err) < 0 && err.code == A3S_ERR_SETUP,
       "a symlinked workspace path is refused: %s", err.msg);
    ok(absent(ws, ".git"), "nothing was created through the link");
    ok(acq("relative/ws", &d, NULL, &pins, &err) < 0 && err.code == A3S_ERR_INVALID,
       "a relative workspace is refused");
    a3s_strv_free(&d);
}

static void test_swapped_workspace(void)
{
    char ws[PATH_MAX], moved[PATH_MAX];
    new_ws(ws, "swap");
    a3s_strv d = names(".git", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(acq(ws, &d, NULL, &pins, &err) == 0, "acquire: %s", err.msg);
    fmt_path(moved, "%s.moved", ws);
    ok(rename(ws, moved) == 0, "workspace renamed away");
    ok(mkdir(ws, 0755) == 0, "a new directory at the old workspace path");
    make_dir(ws, ".git"); /* a decoy */
    a3s_pins_release(pins);
    ok(absent(moved, ".git"), "the pin is removed where it really is");
    ok(is_dir(ws, ".git"), "the decoy at the old workspace path is untouched");
    a3s_strv_free(&d);
}

static void test_stale_entries(void)
{
    char ws[PATH_MAX], p[PATH_MAX];
    new_ws(ws, "stale");
    a3s_strv d = names(".git", NULL);
    a3s_pins *a = NULL, *b = NULL;
    a3s_error err = {0};

    /* Our pin removed behind our back, then pinned again by someone else: the first
     * holder must never remove the second pin, even if the inode number is reused. */
    ok(acq(ws, &d, NULL, &a, &err) == 0, "acquire a: %s", err.msg);
    path_of(p, ws, ".git");
    ok(rmdir(p) == 0, "pin removed externally");
    ok(acq(ws, &d, NULL, &b, &err) == 0 && npaths(b) == 1, "acquire b re-creates the pin");
    a3s_pins_release(a);
    ok(is_dir(ws, ".git") && held(ws, ".git"), "release of the stale holder keeps b's pin");
    a3s_pins_release(b);
    ok(absent(ws, ".git"), "b's release removes it");

    /* Our pin replaced by a foreign directory: the next acquirer does not share it. */
    ok(acq(ws, &d, NULL, &a, &err) == 0, "acquire a again: %s", err.msg);
    make_dir(ws, "foreign");
    char from[PATH_MAX];
    path_of(from, ws, "foreign");
    ok(rename(from, p) == 0, "pin replaced by a foreign directory");
    ok(acq(ws, &d, NULL, &b, &err) == 0 && npaths(b) == 0,
       "the foreign directory is not taken as a pin");
    a3s_pins_release(b);
    a3s_pins_release(a);
    ok(is_dir(ws, ".git"), "the foreign directory survives both releases");
    a3s_strv_free(&d);
}

static void test_edge_lists(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "edge");
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(acq(ws, NULL, NULL, &pins, &err) == 0 && pins, "NULL lists are empty lists");
    ok(a3s_pins_paths(pins) && a3s_pins_paths(pins)[0] == NULL, "no paths, NULL-terminated");
    a3s_pins_release(pins);
    a3s_pins_release(NULL);
    ok(1, "release(NULL) is a no-op");

    a3s_strv d = names(".git", ".git", ".x", NULL), f = names(".x", NULL);
    ok(acq(ws, &d, &f, &pins, &err) == 0, "duplicates: %s", err.msg);
    ok(npaths(pins) == 2, "a name listed twice is held once (got %zu)", npaths(pins));
    ok(is_dir(ws, ".x"), "a name in both lists is a directory");
    a3s_pins_release(pins);
    ok(count_entries(ws) == 0, "all removed");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* ---------------------------------------------------------------- other processes */

/* A holder in a child process: acquires, reports on `ready` ('y' + npaths, or 'n'), then
 * waits for a byte on `go` and releases ('r') or just exits ('x') without releasing. */
struct holder {
    pid_t pid;
    int ready, go;
};

static struct holder spawn_holder(const char *ws, const a3s_strv *d, const a3s_strv *f)
{
    int r[2], g[2];
    if (pipe2(r, O_CLOEXEC) < 0 || pipe2(g, O_CLOEXEC) < 0)
        exit(2);
    struct holder h = {.pid = fork()};
    if (h.pid < 0)
        exit(2);
    if (h.pid == 0) {
        close(r[0]);
        close(g[1]);
        a3s_pins *pins = NULL;
        a3s_error err = {0};
        char msg[2] = {'n', 0};
        if (acq(ws, d, f, &pins, &err) == 0) {
            msg[0] = 'y';
            msg[1] = (char)npaths(pins);
        }
        if (write(r[1], msg, 2) != 2)
            _exit(3);
        char c = 0;
        if (read(g[0], &c, 1) == 1 && c == 'r')
            a3s_pins_release(pins);
        _exit(0);
    }
    close(r[1]);
    close(g[0]);
    h.ready = r[0];
    h.go = g[1];
    return h;
}

/* Wait for the child's acquire; returns its number of paths, or -1 if it failed. */
static int holder_ready(struct holder *h)
{
    char msg[2];
    if (read(h->ready, msg, 2) != 2 || msg[0] != 'y')
        return -1;
    return msg[1];
}

/* 'r': release and exit; 'x': exit without releasing; 'k': SIGKILL. Then reap. */
static bool holder_end(struct holder *h, char how)
{
    if (how == 'k')
        kill(h->pid, SIGKILL);
    else if (write(h->go, &how, 1) != 1)
        return false;
    int status = 0;
    bool reaped = waitpid(h->pid, &status, 0) == h->pid;
    close(h->ready);
    close(h->go);
    return reaped &&
           (how == 'k' ? WIFSIGNALED(status) : WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Files in the state directory whose name ends with suffix ("" for all). */
/* Tombs ("tomb-*": swept runs whose tag is looked for a while, stale.c) are not records. */
static size_t state_files(const char *suffix)
{
    DIR *d = opendir(state_dir);
    size_t n = 0, sl = strlen(suffix);
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0 && l >= sl &&
            strncmp(de->d_name, "tomb-", 5) != 0 && strcmp(de->d_name + l - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static ino_t ino_of(const char *ws, const char *name)
{
    char p[PATH_MAX];
    struct stat st;
    path_of(p, ws, name);
    return lstat(p, &st) == 0 ? st.st_ino : 0;
}

static void test_cross_process_share(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "xproc");
    a3s_strv d = names(".git", ".codex", NULL), f = names(".mcp.json", ".bashrc", NULL);
    a3s_error err = {0};

    /* The child creates, we share; the child leaves first. */
    struct holder h = spawn_holder(ws, &d, &f);
    ok(holder_ready(&h) == 4, "another process pinned four names");
    ino_t git = ino_of(ws, ".git");
    ok(held(ws, ".git") && held(ws, ".bashrc"), "its pins are held as seen from here");
    ok(state_files(".pins") == 1 && state_files(".lock") == 1,
       "one record and one lock file in the state directory");
    a3s_pins *mine = NULL;
    ok(acq(ws, &d, &f, &mine, &err) == 0 && npaths(mine) == 4,
       "a second process shares all four pins: %s", err.msg);
    ok(ino_of(ws, ".git") == git, "the same inode, not a new placeholder");
    ok(holder_end(&h, 'r'), "the first holder releases and exits");
    ok(is_dir(ws, ".git") && is_dir(ws, ".codex") && is_reg(ws, ".mcp.json") &&
           is_reg(ws, ".bashrc"),
       "the pins survive the first holder (the second still has them bound)");
    ok(held(ws, ".codex"), "and are still recorded");
    a3s_pins_release(mine);
    ok(count_entries(ws) == 0, "the last release removes them all");
    ok(state_files("") == 0, "and leaves nothing in the state directory (%zu)", state_files(""));

    /* We create, the child shares; we leave first; the child's release cleans up. */
    ok(acq(ws, &d, &f, &mine, &err) == 0 && npaths(mine) == 4, "we pin first: %s", err.msg);
    h = spawn_holder(ws, &d, &f);
    ok(holder_ready(&h) == 4, "the other process shares our four pins");
    a3s_pins_release(mine);
    ok(count_entries(ws) == 4, "our release keeps them for the other holder");
    ok(holder_end(&h, 'r'), "the other holder releases");
    ok(count_entries(ws) == 0 && state_files("") == 0, "its release removes them and the state");

    /* A holder that exits without releasing (no crash handler ran) counts as gone. */
    h = spawn_holder(ws, &d, &f);
    ok(holder_ready(&h) == 4, "a holder that will exit without releasing");
    ok(holder_end(&h, 'x'), "it exits");
    ok(count_entries(ws) == 4, "its pins are still there");
    ok(acq(ws, NULL, NULL, &mine, &err) == 0 && npaths(mine) == 0,
       "an acquire with nothing to pin");
    ok(count_entries(ws) == 0, "removes the pins of the gone holder");
    a3s_pins_release(mine);
    ok(state_files("") == 0, "no state left");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_killed_holder(void)
{
    char ws[PATH_MAX], p[PATH_MAX];
    new_ws(ws, "killed");
    a3s_strv d = names(".git", ".codex", ".vscode", NULL), f = names(".mcp.json", ".bashrc", NULL);
    a3s_error err = {0};

    struct holder h = spawn_holder(ws, &d, &f);
    ok(holder_ready(&h) == 5, "a holder pinned five names");
    write_file(ws, ".bashrc", "user wrote this");
    write_file(ws, ".codex/config", "user config");
    ino_t vscode = ino_of(ws, ".vscode");
    ok(holder_end(&h, 'k'), "the holder is killed with SIGKILL");
    ok(count_entries(ws) == 5 && state_files(".pins") == 1,
       "its pins and its record are left behind");
    ok(held(ws, ".git") && held(ws, ".mcp.json"), "untouched stale pins count as pins (missing)");
    ok(!held(ws, ".bashrc") && !held(ws, ".codex"), "touched ones are ordinary entries now");

    /* The next run asks for .vscode again (takes it over) and nothing else. */
    a3s_strv again = names(".vscode", NULL);
    a3s_pins *next = NULL;
    ok(acq(ws, &again, NULL, &next, &err) == 0, "the next acquire succeeds: %s", err.msg);
    ok(npaths(next) == 1 && has_path(next, ws, ".vscode") && ino_of(ws, ".vscode") == vscode,
       "it takes over the dead holder's untouched .vscode pin");
    ok(absent(ws, ".git") && absent(ws, ".mcp.json"), "and removes its other untouched pins");
    ok(is_reg(ws, ".bashrc") && is_reg(ws, ".codex/config"), "touched ones are kept");
    path_of(p, ws, ".bashrc");
    a3s_pins_release(next);
    ok(absent(ws, ".vscode"), "the taken-over pin goes with its new holder");
    ok(is_reg(ws, ".bashrc") && is_dir(ws, ".codex") && state_files("") == 0,
       "the touched entries stay, forgotten by the state");
    a3s_strv_free(&again);
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_sweep(void)
{
    char ws[PATH_MAX], ws2[PATH_MAX];
    new_ws(ws, "sweep");
    new_ws(ws2, "sweep-live");
    a3s_strv d = names(".git", NULL), f = names(".zshrc", NULL);

    struct holder dead = spawn_holder(ws, &d, &f), live = spawn_holder(ws2, &d, &f);
    ok(holder_ready(&dead) == 2 && holder_ready(&live) == 2, "two holders in two workspaces");
    ok(holder_end(&dead, 'k'), "one is killed");
    a3s_pins_sweep(state_root);
    ok(count_entries(ws) == 0, "the sweep removes the dead holder's pins without a run there");
    ok(count_entries(ws2) == 2, "and leaves the live holder's pins alone");
    ok(state_files(".pins") == 1, "one record left (the live one)");
    ok(holder_end(&live, 'r'), "the live holder releases");
    ok(count_entries(ws2) == 0 && state_files("") == 0, "all clean");

    /* A killed holder whose workspace was moved: the record waits for that workspace. */
    char moved[PATH_MAX];
    dead = spawn_holder(ws, &d, &f);
    ok(holder_ready(&dead) == 2 && holder_end(&dead, 'k'), "a holder killed again");
    fmt_path(moved, "%s.moved", ws);
    ok(rename(ws, moved) == 0 && mkdir(ws, 0755) == 0, "its workspace moved, a decoy in its place");
    make_dir(ws, ".git");
    a3s_pins_sweep(state_root);
    ok(is_dir(ws, ".git") && count_entries(moved) == 2, "the sweep touches neither");
    a3s_pins *p = NULL;
    a3s_error err = {0};
    ok(acq(moved, NULL, NULL, &p, &err) == 0, "a run in the moved workspace: %s", err.msg);
    ok(count_entries(moved) == 0, "recovers its pins by identity");
    a3s_pins_release(p);
    ok(state_files("") == 0, "no state left");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

/* Write a record by hand, as a process that never held the lock would have left it. */
static void fake_record(const char *ws, const char *name, bool dir, long long ctime_adjust)
{
    char p[PATH_MAX], rec[PATH_MAX];
    struct stat ws_st, st;
    path_of(p, ws, name);
    if (stat(ws, &ws_st) < 0 || lstat(p, &st) < 0)
        exit(2);
    fmt_path(rec, "%s/ws-%llx-%llx.pins", state_dir, (unsigned long long)ws_st.st_dev,
             (unsigned long long)ws_st.st_ino);
    FILE *f = fopen(rec, "w");
    if (!f)
        exit(2);
    fprintf(f, "a3s-pins 1\nws ");
    for (const char *c = ws; *c; c++)
        fprintf(f, "%02x", (unsigned char)*c);
    fprintf(f, "\n%c %llu %llu %lld %ld ", dir ? 'd' : 'f', (unsigned long long)st.st_dev,
            (unsigned long long)st.st_ino, (long long)st.st_ctim.tv_sec + ctime_adjust,
            st.st_ctim.tv_nsec);
    for (const char *c = name; *c; c++)
        fprintf(f, "%02x", (unsigned char)*c);
    fprintf(f, "\n");
    fclose(f);
}

static void test_liveness_is_the_lock(void)
{
    char ws[PATH_MAX];
    new_ws(ws, "live");
    a3s_error err = {0};
    a3s_pins *p = NULL;

    /* This process is alive, and its pid could be in any pid-based record: only the
     * holder lock counts, so a record nobody holds is stale even so. */
    if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
        exit(2);
    make_dir(ws, ".idea");
    fake_record(ws, ".idea", true, 0);
    ok(held(ws, ".idea"), "a recorded, untouched pin is held");
    ok(acq(ws, NULL, NULL, &p, &err) == 0, "acquire: %s", err.msg);
    ok(absent(ws, ".idea"), "a record without a live holder is stale, whoever wrote it");
    a3s_pins_release(p);
    ok(state_files("") == 0, "and is forgotten");

    /* A recycled inode number: same name and inode, but a different ctime. */
    make_dir(ws, ".idea");
    fake_record(ws, ".idea", true, -100);
    ok(!held(ws, ".idea"), "an entry whose ctime differs from the record is not a pin");
    ok(acq(ws, NULL, NULL, &p, &err) == 0, "acquire: %s", err.msg);
    ok(is_dir(ws, ".idea"), "and is never removed");
    a3s_pins_release(p);
    ok(state_files("") == 0, "its record is dropped");
    char ip[PATH_MAX];
    path_of(ip, ws, ".idea");
    rmdir(ip);

    /* A corrupt record fails closed. */
    write_file(ws, ".profile", "");
    fake_record(ws, ".profile", false, 0);
    char rec[PATH_MAX];
    struct stat ws_st;
    stat(ws, &ws_st);
    fmt_path(rec, "%s/ws-%llx-%llx.pins", state_dir, (unsigned long long)ws_st.st_dev,
             (unsigned long long)ws_st.st_ino);
    FILE *f = fopen(rec, "a");
    fprintf(f, "garbage line\n");
    fclose(f);
    a3s_strv d = names(".git", NULL);
    ok(acq(ws, &d, NULL, &p, &err) < 0 && err.code == A3S_ERR_SETUP && strstr(err.msg, "corrupt"),
       "a corrupt record fails the acquire: %s", err.msg);
    ok(absent(ws, ".git") && is_reg(ws, ".profile"), "nothing created or removed");
    ok(!held(ws, ".profile"), "and nothing counts as held");
    unlink(rec);
    a3s_strv_free(&d);
    char lock[PATH_MAX];
    fmt_path(lock, "%s/ws-%llx-%llx.lock", state_dir, (unsigned long long)ws_st.st_dev,
             (unsigned long long)ws_st.st_ino);
    unlink(lock);
}

static void test_held_is_consistent(void)
{
    char ws[PATH_MAX], lock[PATH_MAX];
    new_ws(ws, "consistent");
    struct stat ws_st;
    if (stat(ws, &ws_st) < 0 || (mkdir(state_dir, 0700) < 0 && errno != EEXIST))
        exit(2);
    fmt_path(lock, "%s/ws-%llx-%llx.lock", state_dir, (unsigned long long)ws_st.st_dev,
             (unsigned long long)ws_st.st_ino);

    /* Play an acquire caught between creating a pin and recording it: a concurrent
     * a3s_pins_held must wait for the record instead of calling the pin user content. */
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    ok(lfd >= 0 && fcntl(lfd, F_OFD_SETLK, &fl) == 0, "the workspace mutex, taken by hand");
    make_dir(ws, ".claude");
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        char c = held(ws, ".claude") ? 'y' : 'n';
        _exit(write(p[1], &c, 1) == 1 ? 0 : 3);
    }
    close(p[1]);
    struct timespec pause_ = {.tv_nsec = 200 * 1000 * 1000};
    nanosleep(&pause_, NULL);
    int status = 0;
    ok(waitpid(pid, &status, WNOHANG) == 0, "a3s_pins_held waits while the mutex is taken");
    fake_record(ws, ".claude", true, 0);
    fl.l_type = F_UNLCK;
    fcntl(lfd, F_OFD_SETLK, &fl);
    char c = 0;
    ok(read(p[0], &c, 1) == 1 && c == 'y', "and then sees the recorded pin (got %c)", c);
    waitpid(pid, &status, 0);
    close(p[0]);
    close(lfd);

    /* A name seen a moment ago and gone now (removed by its last holder) is missing. */
    char cp[PATH_MAX];
    path_of(cp, ws, ".claude");
    rmdir(cp);
    ok(!held(ws, ".claude"), "a vanished pin is not held (the scan sees it is gone)");
    ok(!held(ws, "a/b"), "an invalid name is not held");
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(acq(ws, NULL, NULL, &pins, &err) == 0, "acquire: %s", err.msg);
    a3s_pins_release(pins);
    ok(state_files("") == 0 && count_entries(ws) == 0, "the dead record is forgotten");
}

/* A process stopped (SIGSTOP) while it holds a workspace's mutex: others fail closed
 * after a bounded wait instead of hanging. Another open file description of this very
 * process plays that process. */
static void test_stuck_mutex_times_out(void)
{
    char ws[PATH_MAX], lock[PATH_MAX];
    new_ws(ws, "stuck");
    struct stat ws_st;
    if (stat(ws, &ws_st) < 0 || (mkdir(state_dir, 0700) < 0 && errno != EEXIST))
        exit(2);
    fmt_path(lock, "%s/ws-%llx-%llx.lock", state_dir, (unsigned long long)ws_st.st_dev,
             (unsigned long long)ws_st.st_ino);
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    ok(lfd >= 0 && fcntl(lfd, F_OFD_SETLK, &fl) == 0, "the mutex held by a stuck holder");
    a3s_strv d = names(".git", NULL);
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    time_t t0 = time(NULL);
    int rc = acq(ws, &d, NULL, &pins, &err);
    time_t took = time(NULL) - t0;
    ok(rc < 0 && err.code == A3S_ERR_SETUP && strstr(err.msg, "stays locked"),
       "acquire fails closed: %s", err.msg);
    /* The wait adds up 10 s of requested pauses (~400 of them), each of which oversleeps
     * on a loaded machine: the upper bound is generous, it catches a wait with no bound
     * (which ctest's timeout would otherwise end), not a slow machine. */
    ok(took >= 8 && took <= 60, "after a bounded wait (%lds)", (long)took);
    ok(absent(ws, ".git") && pins == NULL, "nothing pinned");
    close(lfd);
    unlink(lock);
    a3s_strv_free(&d);
}

static void test_state_dir_hardening(void)
{
    char ws[PATH_MAX], r[PATH_MAX], sd[PATH_MAX], other[PATH_MAX];
    new_ws(ws, "harden");
    a3s_strv d = names(".git", NULL);
    a3s_error err = {0};
    a3s_pins *p = NULL;

    fmt_path(r, "%s/root-fresh", root);
    ok(mkdir(r, 0755) == 0, "a fresh state root");
    fmt_path(sd, "%s/a3s-sandbox-state-%lu", r, (unsigned long)geteuid());
    umask(077);
    ok(a3s_pins_acquire_in(r, -1, ws, &d, NULL, &p, &err) == 0, "acquire creates the state dir: %s",
       err.msg);
    umask(022);
    struct stat st;
    ok(lstat(sd, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0700 &&
           st.st_uid == geteuid(),
       "state dir is ours, mode 0700 (got %o)", (unsigned)(st.st_mode & 07777));
    a3s_pins_release(p);
    ok(absent(ws, ".git"), "released");

    struct {
        const char *what;
        int kind;
    } bad[] = {{"a symbolic link", 0},
               {"a regular file", 1},
               {"group-writable", 2},
               {"world-writable", 3},
               {"owned by another user", 4}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fmt_path(r, "%s/root-bad-%zu", root, i);
        fmt_path(sd, "%s/a3s-sandbox-state-%lu", r, (unsigned long)geteuid());
        fmt_path(other, "%s/elsewhere", r);
        if (mkdir(r, 0755) < 0)
            exit(2);
        int rc = 0;
        switch (bad[i].kind) {
        case 0:
            rc = mkdir(other, 0700) | symlink(other, sd);
            break;
        case 1:
            write_file(r, strrchr(sd, '/') + 1, "");
            break;
        case 2:
            rc = mkdir(sd, 0700) | chmod(sd, 0770);
            break;
        case 3:
            rc = mkdir(sd, 0700) | chmod(sd, 01777);
            break;
        case 4:
            if (geteuid() != 0) {
                ok(1, "state dir owned by another user # SKIP needs root");
                continue;
            }
            rc = mkdir(sd, 0700) | chown(sd, 65534, 65534);
            break;
        }
        ok(rc == 0, "set up a state dir that is %s", bad[i].what);
        memset(&err, 0, sizeof err);
        p = (a3s_pins *)&err;
        ok(a3s_pins_acquire_in(r, -1, ws, &d, NULL, &p, &err) < 0 && err.code == A3S_ERR_SETUP &&
               strstr(err.msg, "refusing state directory") && p == NULL,
           "a state dir that is %s is refused: %s", bad[i].what, err.msg);
        ok(absent(ws, ".git"), "and nothing is pinned");
        int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ok(!a3s_pins_held(fd, r, ".git"), "a3s_pins_held trusts nothing there");
        close(fd);
        ok(a3s_stale_scratch_own(r, "/nonexistent/a3s-sandbox-x", &err) < 0 &&
               err.code == A3S_ERR_SETUP,
           "nor does the scratch owner record");
    }
    a3s_strv_free(&d);
}

static void test_default_root(void)
{
    ok(strcmp(a3s_stale_root("/somewhere/else"), "/tmp") == 0,
       "the state lives under /tmp whatever the TMPDIR, so all runs see it");
    ok(strcmp(a3s_stale_root(NULL), "/tmp") == 0, "also without a temp dir");

    /* a3s_pins_acquire and a3s_pins_held agree on the default root. */
    char ws[PATH_MAX];
    new_ws(ws, "default");
    a3s_strv d = names(".git", NULL);
    a3s_pins *p = NULL;
    a3s_error err = {0};
    ok(a3s_pins_acquire(ws, &d, NULL, &p, &err) == 0 && npaths(p) == 1, "default acquire: %s",
       err.msg);
    int fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok(a3s_pins_held(fd, a3s_stale_root(NULL), ".git"), "held under the default root");
    ok(!a3s_pins_held(fd, state_root, ".git"), "and not under another one");
    close(fd);
    a3s_pins_release(p);
    ok(absent(ws, ".git"), "released");
    a3s_strv_free(&d);
}

/* ---------------------------------------------------------------- scratch dirs */

struct scratch_child {
    pid_t pid;
    int ready;
    char path[PATH_MAX];
};

/* A child that makes a scratch dir under tmp, owns it, fills it, and sleeps. */
static struct scratch_child spawn_scratch(const char *tmp)
{
    struct scratch_child c = {0};
    int r[2];
    fmt_path(c.path, "%s/a3s-sandbox-XXXXXX", tmp);
    if (!mkdtemp(c.path) || pipe2(r, O_CLOEXEC) < 0)
        exit(2);
    c.pid = fork();
    if (c.pid < 0)
        exit(2);
    if (c.pid == 0) {
        close(r[0]);
        a3s_error err = {0};
        char sub[PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/locked", c.path);
        char ok_ = a3s_stale_scratch_own(state_root, c.path, &err) == 0 && mkdir(sub, 0700) == 0 &&
                           chmod(sub, 0) == 0
                       ? 'y'
                       : 'n';
        if (write(r[1], &ok_, 1) != 1)
            _exit(3);
        pause();
        _exit(0);
    }
    close(r[1]);
    char c1 = 0;
    if (read(r[0], &c1, 1) != 1 || c1 != 'y')
        c.pid = -c.pid;
    close(r[0]);
    return c;
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void test_stale_scratch(void)
{
    char tmp[PATH_MAX], foreign[PATH_MAX];
    fmt_path(tmp, "%s/hosttmp", root);
    if (mkdir(tmp, 0755) < 0)
        exit(2);
    size_t before = state_files("");

    struct scratch_child dead = spawn_scratch(tmp), live = spawn_scratch(tmp);
    ok(dead.pid > 0 && live.pid > 0, "two processes own scratch dirs");
    ok(state_files("") == before + 2, "two owner records");
    reap(dead.pid);
    fmt_path(foreign, "%s/a3s-sandbox-nobody", tmp);
    ok(mkdir(foreign, 0700) == 0, "a scratch-like dir without an owner record");
    a3s_stale_sweep(state_root);
    struct stat st;
    ok(lstat(dead.path, &st) < 0 && errno == ENOENT,
       "the sweep removes the killed owner's scratch dir (even an unreadable subdir)");
    ok(lstat(live.path, &st) == 0, "the live owner's scratch dir stays");
    ok(lstat(foreign, &st) == 0, "a dir without a record is never touched");
    ok(state_files("") == before + 1, "the dead owner's record is gone");
    reap(live.pid);
    rmdir(foreign);

    /* Own and disown in this process. */
    char mine[PATH_MAX];
    a3s_error err = {0};
    fmt_path(mine, "%s/a3s-sandbox-XXXXXX", tmp);
    ok(mkdtemp(mine) && a3s_stale_scratch_own(state_root, mine, &err) == 0, "own: %s", err.msg);
    a3s_stale_sweep(state_root);
    ok(lstat(mine, &st) == 0, "a sweep in the owning process keeps it");
    rmdir(mine);
    a3s_stale_scratch_disown(mine);
    a3s_stale_scratch_disown(mine); /* unknown now: ignored */
    a3s_stale_scratch_disown(NULL);
    ok(a3s_stale_scratch_own(state_root, "/tmp/not-a-scratch", &err) < 0 &&
           err.code == A3S_ERR_INVALID,
       "only a3s-sandbox-* dirs can be owned");
    a3s_stale_sweep(state_root); /* the live one (reaped above) goes now */
    ok(lstat(live.path, &st) < 0 && state_files("") == before, "every record is gone (%zu)",
       state_files(""));

    /* An owner record of a dead process naming a dir of another user: record dropped,
     * dir kept. */
    if (geteuid() == 0) {
        struct scratch_child c = spawn_scratch(tmp);
        ok(c.pid > 0 && chown(c.path, 65534, 65534) == 0, "a scratch dir now owned by nobody");
        reap(c.pid);
        a3s_stale_sweep(state_root);
        ok(lstat(c.path, &st) == 0, "is not removed");
        ok(state_files("") == before, "its record is dropped");
        char sub[PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/locked", c.path);
        rmdir(sub);
        rmdir(c.path);
    } else {
        ok(1, "foreign scratch dir # SKIP needs root");
    }

    /* An incomplete record (creator between open and lock): kept while young. */
    char own[PATH_MAX];
    fmt_path(own, "%s/scratch-0000", state_dir);
    int fd = open(own, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    ok(fd >= 0, "an empty owner record");
    close(fd);
    a3s_stale_sweep(state_root);
    ok(lstat(own, &st) == 0, "a fresh incomplete record is left for its creator");
    struct timespec old[2] = {{.tv_sec = 1000}, {.tv_sec = 1000}};
    utimensat(AT_FDCWD, own, old, 0);
    a3s_stale_sweep(state_root);
    ok(lstat(own, &st) < 0 && errno == ENOENT, "an old one is removed");
}

/* A state directory another user made first (here: a symbolic link in its place) sends
 * the state to the runtime directory /run/user/<euid>, when that is ours alone. */
static void test_squatted_state_dir(void)
{
    char r[PATH_MAX], squat[PATH_MAX], alt[PATH_MAX];
    fmt_path(r, "%s/squat-root", root);
    fmt_path(squat, "%s/a3s-sandbox-state-%lu", r, (unsigned long)geteuid());
    const char *run = a3s_stale_fallback_root();
    fmt_path(alt, "%s/a3s-sandbox-state-%lu", run, (unsigned long)geteuid());
    bool made_run = false;
    struct stat st;
    if (stat(run, &st) < 0) {
        (void)mkdir("/run/user", 0755); /* root only; others simply cannot */
        made_run = mkdir(run, 0700) == 0;
    }
    a3s_error err = {0};
    ok(mkdir(r, 0755) == 0 && symlink("/", squat) == 0, "a squatted state dir name");
    int fd = a3s_stale_state_open(r, true, &err);
    bool have_run = stat(run, &st) == 0 && st.st_uid == geteuid();
    struct stat a, b;
    if (have_run)
        ok(fd >= 0 && fstat(fd, &a) == 0 && stat(alt, &b) == 0 && a.st_ino == b.st_ino,
           "the state goes to %s instead (%s)", alt, err.msg);
    else
        ok(fd < 0 && strstr(err.msg, "refusing state directory"),
           "without a runtime directory the refusal stands: %s", err.msg);
    if (fd >= 0)
        close(fd);
    rmdir(alt);
    if (made_run)
        rmdir(run);
    unlink(squat);
    rmdir(r);
}

int main(void)
{
    char tmpl[] = "/tmp/a3s-test-pin-XXXXXX";
    umask(022);
    if (!mkdtemp(tmpl) || !realpath(tmpl, root)) {
        perror("mkdtemp");
        return 2;
    }
    fmt_path(state_root, "%s", root);
    fmt_path(state_dir, "%s/a3s-sandbox-state-%lu", state_root, (unsigned long)geteuid());
    int fds = count_fds();

    test_create_and_remove();
    test_modified_kept();
    test_replaced_kept();
    test_preexisting_untouched();
    test_refcount_sequential();
    test_refcount_concurrent();
    test_failure_cleans_up();
    test_workspace_symlink_refused();
    test_swapped_workspace();
    test_stale_entries();
    test_edge_lists();
    test_cross_process_share();
    test_killed_holder();
    test_sweep();
    test_liveness_is_the_lock();
    test_held_is_consistent();
    test_stuck_mutex_times_out();
    test_state_dir_hardening();
    test_default_root();
    test_stale_scratch();
    test_squatted_state_dir();

    ok(count_fds() == fds, "no file descriptor leaked (%d before, %d after)", fds, count_fds());
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
