/* Unit tests for backends/linux/pin.c across processes: placeholders shared between
 * holders, a killed holder's taken over, the sweep, liveness as the lock, the held check,
 * a stuck mutex, the state directory's hardening and its default root. */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "pin_fixture.h"
#include "stale.h"

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

int main(void)
{
    if (pin_fixture_init() != 0)
        return 2;
    test_cross_process_share();
    test_killed_holder();
    test_sweep();
    test_liveness_is_the_lock();
    test_held_is_consistent();
    test_stuck_mutex_times_out();
    test_state_dir_hardening();
    test_default_root();
    pin_fixture_done();
    return tap_done();
}
