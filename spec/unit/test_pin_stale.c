/* Unit tests for backends/linux/stale.c through the pins' state: scratch directories of
 * dead runs removed (those of live ones and of others kept), and a squatted state
 * directory. */
#include <signal.h>
#include <sys/wait.h>

#include "pin_fixture.h"
#include "stale.h"

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
    if (pin_fixture_init() != 0)
        return 2;
    test_stale_scratch();
    test_squatted_state_dir();
    pin_fixture_done();
    return tap_done();
}
