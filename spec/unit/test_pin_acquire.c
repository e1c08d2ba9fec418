/* Unit tests for backends/linux/pin.c: placeholders for missing protected workspace
 * entries, within one process (made and removed, kept when changed, counted references,
 * failures cleaned up, refused workspaces, stale entries, edge lists). */
#include <pthread.h>

#include "pin_fixture.h"

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

int main(void)
{
    if (pin_fixture_init() != 0)
        return 2;
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

    ok(count_fds() == fds, "no file descriptor leaked (%d before, %d after)", fds, count_fds());
    pin_fixture_done();
    return tap_done();
}
