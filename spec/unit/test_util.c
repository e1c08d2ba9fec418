/* Unit tests of a3s_rmtree_at (backends/linux/rmtree.c), the removal of scratch directories whose
 * whole content the sandboxed command chose: no depth limit (chains 5000 and 100000
 * deep), a bounded number of fds (the removal runs under a tiny RLIMIT_NOFILE),
 * directories and files without permissions, many entries, special files, symlinks that
 * must not be followed, and mount points that must not be entered (as root). Everything
 * but the mount cases runs as an unprivileged user: root would bypass the permissions. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "rmtree.h"
#include "util.h"

#define NOBODY 65534

static char base[] = "/tmp/a3s-test-util-XXXXXX";
static int base_fd = -1;

static bool exists_at(int dfd, const char *p)
{
    struct stat st;
    return fstatat(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int put_file(int dfd, const char *name, const char *data, mode_t mode)
{
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int rc = a3s_write_all(fd, data, strlen(data));
    if (close(fd) < 0 || rc < 0)
        return -1;
    return fchmodat(dfd, name, mode, 0);
}

static bool file_is(int dfd, const char *name, const char *want)
{
    char buf[256] = {0};
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n >= 0 && strcmp(buf, want) == 0;
}

/* top/d/d/.../d (depth levels below top) with a file at the bottom; every lock_every-th
 * level (0: none) ends up mode 000, as does the bottom directory. Creating it needs no
 * path longer than one name. Returns 0 on success. */
static int make_chain(const char *top, int depth, int lock_every)
{
    if (mkdirat(base_fd, top, 0755) < 0)
        return -1;
    int fd = openat(base_fd, top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 1; fd >= 0 && i <= depth; i++) {
        int next = -1;
        if (mkdirat(fd, "d", 0755) == 0)
            next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        /* Lock the parent now that its child exists: the chain stays reachable through
         * the open fds, not through path lookups. */
        if (next >= 0 && lock_every > 0 && i % lock_every == 0 && fchmod(fd, 0) < 0) {
            close(next);
            next = -1;
        }
        close(fd);
        fd = next;
    }
    if (fd < 0)
        return -1;
    int rc = put_file(fd, "bottom.bin", "data at the bottom", 0);
    if (rc == 0 && lock_every > 0)
        rc = fchmod(fd, 0);
    close(fd);
    return rc;
}

static size_t open_fds(void)
{
    size_t n = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            n++;
    return n;
}

/* Run a3s_rmtree_at(base_fd, name) in a child whose RLIMIT_NOFILE leaves only `spare` fd
 * numbers above those open now. Returns its result, or -2 if the child failed. */
static int rmtree_with_fds(const char *name, int spare)
{
    int highest = 0;
    for (int fd = 0; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0)
            highest = fd;
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {(rlim_t)(highest + 1 + spare), (rlim_t)(highest + 1 + spare)};
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            _exit(3);
        _exit(a3s_rmtree_at(base_fd, name) == 0 ? 0 : 1);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) > 1)
        return -2;
    return WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Root only, in a private mount namespace: mounts inside the tree, and a top that is a
 * mount point, are never emptied; everything else still goes. Returns a bit set of the
 * failed checks, or -1 when mounts are not possible here. */
static int mount_cases(void)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
            _exit(100);
        /* An fd opened before unshare() still walks the old namespace's mounts. */
        close(base_fd);
        if ((base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            _exit(101);
        char p[512];
        int bad = 0;
        /* mtree/a/mnt: a tmpfs; mtree/c/bind: a bind mount of the same filesystem (same
         * st_dev, only the mount id tells); mtree/b: plain. */
        if (mkdirat(base_fd, "mtree", 0700) < 0 || mkdirat(base_fd, "mtree/a", 0700) < 0 ||
            mkdirat(base_fd, "mtree/a/mnt", 0700) < 0 || mkdirat(base_fd, "mtree/b", 0700) < 0 ||
            mkdirat(base_fd, "mtree/c", 0700) < 0 || mkdirat(base_fd, "mtree/c/bind", 0700) < 0 ||
            mkdirat(base_fd, "bound", 0700) < 0 || put_file(base_fd, "bound/keep", "k", 0600) < 0 ||
            put_file(base_fd, "mtree/b/file", "x", 0600) < 0)
            _exit(101);
        snprintf(p, sizeof p, "%s/mtree/a/mnt", base);
        if (mount("tmpfs", p, "tmpfs", 0, "size=1m") < 0)
            _exit(100);
        snprintf(p, sizeof p, "%s/bound", base);
        char q[512];
        snprintf(q, sizeof q, "%s/mtree/c/bind", base);
        if (mount(p, q, NULL, MS_BIND, NULL) < 0)
            _exit(100);
        if (put_file(base_fd, "mtree/a/mnt/inside", "i", 0600) < 0)
            _exit(101);
        if (a3s_rmtree_at(base_fd, "mtree") != -1)
            bad |= 1;
        if (!exists_at(base_fd, "mtree/a/mnt/inside"))
            bad |= 2;
        if (!file_is(base_fd, "bound/keep", "k") || !exists_at(base_fd, "mtree/c/bind/keep"))
            bad |= 4;
        if (exists_at(base_fd, "mtree/b"))
            bad |= 8;
        /* A top that is itself a mount point. */
        if (mkdirat(base_fd, "mtop", 0700) < 0)
            _exit(101);
        snprintf(p, sizeof p, "%s/mtop", base);
        if (mount("tmpfs", p, "tmpfs", 0, "size=1m") < 0 ||
            put_file(base_fd, "mtop/x", "x", 0600) < 0)
            _exit(101);
        if (a3s_rmtree_at(base_fd, "mtop") != -1 || !exists_at(base_fd, "mtop/x"))
            bad |= 16;
        snprintf(p, sizeof p, "%s/mtop", base);
        (void)umount2(p, MNT_DETACH);
        (void)umount2(q, MNT_DETACH);
        snprintf(p, sizeof p, "%s/mtree/a/mnt", base);
        (void)umount2(p, MNT_DETACH);
        _exit(bad);
    }
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st))
        return 255;
    if (WEXITSTATUS(st) == 100)
        return -1;
    return WEXITSTATUS(st);
}

int main(void)
{
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 1;
    }
    base_fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (base_fd < 0)
        return 1;

    if (geteuid() == 0) {
        int m = mount_cases();
        if (m < 0) {
            printf("# mount namespaces unavailable: mount boundary cases not run\n");
        } else {
            ok(!(m & 1), "a tree with mounts inside is reported as not fully removed");
            ok(!(m & 2), "a tmpfs mounted inside is not emptied");
            ok(!(m & 4), "a bind mount of the same filesystem inside is not emptied");
            ok(!(m & 8), "everything outside the mounts is still removed");
            ok(!(m & 16), "a top that is itself a mount point is refused");
        }
        (void)a3s_rmtree_at(base_fd, "mtree");
        (void)a3s_rmtree_at(base_fd, "mtop");
        (void)a3s_rmtree_at(base_fd, "bound");
        /* The rest as an unprivileged user: root ignores the permissions under test. */
        if (fchown(base_fd, NOBODY, NOBODY) < 0 || setgroups(0, NULL) < 0 ||
            setresgid(NOBODY, NOBODY, NOBODY) < 0 || setresuid(NOBODY, NOBODY, NOBODY) < 0) {
            perror("dropping to nobody");
            return 1;
        }
    }

    /* Outside the trees: what symlinks inside point at. */
    if (mkdirat(base_fd, "outside", 0700) < 0 ||
        put_file(base_fd, "outside/keep", "keep", 0600) < 0)
        return 1;
    char target[512];

    /* Trivial cases. */
    ok(a3s_rmtree_at(base_fd, "missing") == 0, "a missing name is success");
    ok(put_file(base_fd, "plain", "p", 0) == 0 && a3s_rmtree_at(base_fd, "plain") == 0 &&
           !exists_at(base_fd, "plain"),
       "a plain 0-permission file is removed");
    snprintf(target, sizeof target, "%s/outside", base);
    ok(symlinkat(target, base_fd, "link-top") == 0 && a3s_rmtree_at(base_fd, "link-top") == 0 &&
           !exists_at(base_fd, "link-top") && file_is(base_fd, "outside/keep", "keep"),
       "a top that is a symlink to a directory: the link goes, the target stays");

    /* A 5000-deep chain with locked (000) directories along it, under a tight fd limit. */
    size_t fds_before = open_fds();
    ok(make_chain("deep", 5000, 1000) == 0, "built a 5000-deep chain with 000 directories");
    int rc = rmtree_with_fds("deep", 4);
    ok(rc == 0, "5000-deep chain removed with only 4 spare fd numbers (rc %d)", rc);
    ok(!exists_at(base_fd, "deep"), "nothing of the 5000-deep chain is left");
    ok(make_chain("deep2", 300, 7) == 0 && a3s_rmtree_at(base_fd, "deep2") == 0 &&
           !exists_at(base_fd, "deep2"),
       "in-process removal of a 300-deep chain (past the old 256 limit)");
    ok(open_fds() == fds_before, "no fd leaked (%zu open, %zu before)", open_fds(), fds_before);

    /* 100000 deep: no recursion, no O(depth) fds. */
    ok(make_chain("deeper", 100000, 0) == 0, "built a 100000-deep chain");
    rc = rmtree_with_fds("deeper", 4);
    ok(rc == 0 && !exists_at(base_fd, "deeper"), "100000-deep chain removed (rc %d)", rc);

    /* Everything a command may leave: locked dirs and files, special files, symlinks out,
     * many entries, a directory that can only be read, one that can only be searched. */
    int ok_build =
        mkdirat(base_fd, "mix", 0700) == 0 && mkdirat(base_fd, "mix/locked", 0700) == 0 &&
        put_file(base_fd, "mix/locked/a", "a", 0) == 0 &&
        mkdirat(base_fd, "mix/locked/sub", 0) == 0 && fchmodat(base_fd, "mix/locked", 0, 0) == 0 &&
        put_file(base_fd, "mix/nopriv", "n", 0) == 0 && mkfifoat(base_fd, "mix/fifo", 0600) == 0 &&
        mkdirat(base_fd, "mix/ronly", 0700) == 0 &&
        put_file(base_fd, "mix/ronly/f", "f", 0600) == 0 &&
        fchmodat(base_fd, "mix/ronly", 0500, 0) == 0 && mkdirat(base_fd, "mix/xonly", 0700) == 0 &&
        put_file(base_fd, "mix/xonly/f", "f", 0600) == 0 &&
        fchmodat(base_fd, "mix/xonly", 0100, 0) == 0 && mkdirat(base_fd, "mix/many", 0700) == 0;
    snprintf(target, sizeof target, "%s/outside/keep", base);
    ok_build = ok_build && symlinkat(target, base_fd, "mix/link-file") == 0;
    snprintf(target, sizeof target, "%s/outside", base);
    ok_build = ok_build && symlinkat(target, base_fd, "mix/link-dir") == 0 &&
               symlinkat("../../outside", base_fd, "mix/many/link-rel") == 0;
    for (int i = 0; ok_build && i < 20000; i++) {
        char n[64];
        snprintf(n, sizeof n, "mix/many/f%d", i);
        ok_build = put_file(base_fd, n, "", 0600) == 0;
        if (ok_build && i % 100 == 0) {
            snprintf(n, sizeof n, "mix/many/d%d", i);
            ok_build = mkdirat(base_fd, n, i % 200 ? 0700 : 0) == 0;
        }
    }
    ok(ok_build, "built a tree of locked, special and 20000+ entries");
    ok(a3s_rmtree_at(base_fd, "mix") == 0 && !exists_at(base_fd, "mix"),
       "that whole tree is removed");
    ok(file_is(base_fd, "outside/keep", "keep"), "the file symlinked from inside survives");
    ok(exists_at(base_fd, "outside"), "the directory symlinked from inside survives");

    /* The top itself made 000 or 0400 by the command. */
    ok(mkdirat(base_fd, "closed", 0700) == 0 && put_file(base_fd, "closed/f", "f", 0600) == 0 &&
           fchmodat(base_fd, "closed", 0, 0) == 0 && a3s_rmtree_at(base_fd, "closed") == 0 &&
           !exists_at(base_fd, "closed"),
       "a top directory of mode 000 is removed");
    ok(mkdirat(base_fd, "readonly", 0700) == 0 && put_file(base_fd, "readonly/f", "f", 0600) == 0 &&
           fchmodat(base_fd, "readonly", 0400, 0) == 0 && a3s_rmtree_at(base_fd, "readonly") == 0 &&
           !exists_at(base_fd, "readonly"),
       "a top directory of mode 0400 is removed");

    ok(a3s_rmtree_at(base_fd, "outside") == 0, "cleanup");
    close(base_fd);

    /* The errno name table (cgroup messages, the seccomp description, policy names). */
    static const int names[] = {EPERM, EACCES, ELOOP, ENOSYS, EAFNOSUPPORT, EHOSTUNREACH};
    bool round = true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        round = round && a3s_errno_symbol(names[i]) &&
                a3s_errno_from_symbol(a3s_errno_symbol(names[i])) == names[i];
    ok(round, "errno names: value -> name -> value");
    ok_streq(a3s_errno_symbol(EACCES), "EACCES", "errno names: EACCES");
    ok_streq(a3s_errno_symbol(EOPNOTSUPP), "EOPNOTSUPP", "errno names: EOPNOTSUPP, not ENOTSUP");
    ok(a3s_errno_from_symbol("ENOTSUP") == ENOTSUP, "errno names: ENOTSUP is a name too");
    ok(a3s_errno_symbol(0) == NULL && a3s_errno_symbol(-1) == NULL &&
           a3s_errno_symbol(4095) == NULL,
       "errno names: none for 0, -1, 4095");
    ok(a3s_errno_from_symbol(NULL) == -1 && a3s_errno_from_symbol("eacces") == -1 &&
           a3s_errno_from_symbol("") == -1 && a3s_errno_from_symbol("EACCES ") == -1,
       "errno names: exact spelling only");
    if (rmdir(base) < 0)
        printf("# cleanup of %s failed\n", base);
    return tap_done();
}
