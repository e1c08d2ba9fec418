/* The setup step's host mounts (a3s-sandbox-launch --setup; setup_host.h).
 *
 * bubblewrap makes only the namespaces, the read-only view of the host root, /dev and
 * /proc. Every other mount outside the workspace is made here, in the plan's order, with
 * the mount API: bubblewrap re-reads /proc/self/mountinfo after each bind and remount it
 * makes, which costs more than the mounts themselves. The same view as bubblewrap's:
 *   - a bind's source is the host's path as it was before any of these mounts (bubblewrap
 *     takes its sources from the old root): every source is cloned first (open_tree,
 *     recursive), so one under a tmpfs mounted later (/root/.cargo under /root) is still
 *     the host's; the clone is nosuid and nodev, read-only (recursively) or writable;
 *   - a tmpfs is nosuid and nodev with the given mode, writable until a mnt-ro record
 *     makes that one mount read-only (after the binds inside it are made);
 *   - a mount point that is missing is made (directories 0755, files 0444, and missing
 *     parents 0755, with mkdirat), as bubblewrap does;
 *   - symbolic links in parent directories of a mount point, or of a read-only source
 *     the plan spelled through one, are followed (they are the host's, outside the
 *     workspace), never at the path itself, and never anywhere on the way to a writable
 *     source or a read-only one spelled without a link (see clone_source).
 * Nothing here reads the mount table. Any failure refuses the run. */
#include "setup_host.h"
#include "setup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static void close_keep_errno(int fd)
{
    int e = errno;
    if (fd >= 0)
        (void)close(fd);
    errno = e;
}

static int open_tree_clone(int fd, unsigned flags)
{
    return (int)syscall(SYS_open_tree, fd, "",
                        OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | flags);
}

static int mount_setattr_fd(int fd, unsigned flags, unsigned long long set,
                            unsigned long long clr)
{
    struct mount_attr a = {.attr_set = set, .attr_clr = clr};
    return (int)syscall(SYS_mount_setattr, fd, "", flags | AT_EMPTY_PATH, &a, sizeof a);
}

static int move_mount_fd(int from, int to)
{
    return (int)syscall(SYS_move_mount, from, "", to, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

static bool is(const a3s_setup_host_op *o, const char *kind)
{
    return strcmp(o->kind, kind) == 0;
}

bool a3s_setup_host_is(const char *kind)
{
    return strncmp(kind, "mnt-", 4) == 0;
}

/* ---------------------------------------------------------------- sources */

/* The host's path, as it is now: no symbolic link at the path itself, and with no_links
 * none on the way either. */
static int open_host(const char *path, struct stat *st, bool no_links)
{
    struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_NO_MAGICLINKS |
                                      (no_links ? RESOLVE_NO_SYMLINKS : 0)};
    int fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0)
        return -1;
    if (fstat(fd, st) < 0) {
        close_keep_errno(fd);
        return -1;
    }
    if (S_ISLNK(st->st_mode)) {
        (void)close(fd);
        errno = ELOOP;
        return -1;
    }
    return fd;
}

/* A detached clone of the tree at path: nosuid, nodev, and read-only or writable
 * throughout. A writable clone keeps read-only what the host itself mounted read-only
 * (the kernel refuses to clear that flag in a user namespace): more read-only than
 * bubblewrap where such a mount sits below a writable one, never less. */
static int clone_source(const a3s_setup_host_op *o, bool *is_dir)
{
    struct stat st;
    /* A writable root was checked on the host spelled without a symbolic link (it must
     * not reach the sandbox's state directory), and a read-only one with flag 4 was
     * spelled so too: resolved here the same way, so that a concurrent command that swaps
     * a directory on the way for a link (between the plan and this mount) gets the run
     * refused, never the link's target bound. */
    bool writable = !(o->arg & 1), no_links = writable || (o->arg & 4);
    int fd = open_host(o->path, &st, no_links);
    if (fd < 0 && no_links && errno == ELOOP)
        return a3s_setup_fail("%s root %s: a symbolic link on its way appeared since the plan was "
                      "made", writable ? "writable" : "read-only", o->path);
    if (fd < 0)
        return a3s_setup_fail("bind source %s: %s", o->path, strerror(errno));
    *is_dir = S_ISDIR(st.st_mode);
    int src = open_tree_clone(fd, AT_RECURSIVE);
    int e = errno;
    (void)close(fd);
    if (src < 0)
        return a3s_setup_fail("cloning %s: %s", o->path, strerror(e));
    /* Staged: bubblewrap bound the host's source there (below its own /dev or /proc, which
     * hide the host's); the clone is what counts, its mount goes. */
    if ((o->arg & 2) && umount2(o->path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0) {
        e = errno;
        (void)close(src);
        return a3s_setup_fail("the staged bind at %s: %s", o->path, strerror(e));
    }
    const unsigned long long base = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    int rc;
    if (o->arg & 1) {
        rc = mount_setattr_fd(src, AT_RECURSIVE, base | MOUNT_ATTR_RDONLY, 0);
    } else {
        rc = mount_setattr_fd(src, AT_RECURSIVE, base, MOUNT_ATTR_RDONLY);
        if (rc < 0 && errno == EPERM) {
            /* A locked read-only mount in the tree: writable where allowed. */
            rc = mount_setattr_fd(src, AT_RECURSIVE, base, 0);
            if (rc == 0 && mount_setattr_fd(src, 0, 0, MOUNT_ATTR_RDONLY) < 0 &&
                errno != EPERM)
                rc = -1;
        }
    }
    if (rc < 0) {
        e = errno;
        (void)close(src);
        return a3s_setup_fail("mount attributes of %s: %s", o->path, strerror(e));
    }
    return src;
}

/* /dev/null, checked to be the null device, read-only, nosuid and nodev: opening the
 * masked file fails (EACCES), as with bubblewrap's --ro-bind /dev/null. */
static int clone_null(void)
{
    struct stat st;
    int fd = open_host("/dev/null", &st, true);
    if (fd < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
        if (fd >= 0)
            (void)close(fd);
        return a3s_setup_fail("/dev/null is not the null device");
    }
    int src = open_tree_clone(fd, 0);
    int e = errno;
    (void)close(fd);
    if (src < 0)
        return a3s_setup_fail("cloning /dev/null: %s", strerror(e));
    if (mount_setattr_fd(src, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                         0) < 0) {
        e = errno;
        (void)close(src);
        return a3s_setup_fail("/dev/null mount attributes: %s", strerror(e));
    }
    return src;
}

/* A fresh detached tmpfs with that mode, nosuid and nodev. */
static int make_tmpfs(unsigned long long mode)
{
    char m[16];
    snprintf(m, sizeof m, "%llo", mode);
    int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return -1;
    int mnt = -1;
    /* "tmpfs" as the source, as the mount table shows bubblewrap's. */
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", "tmpfs", 0) == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", m, 0) == 0 &&
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
        mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    close_keep_errno(fs);
    return mnt;
}

/* ---------------------------------------------------------------- mount points */

enum want { EXISTING, DIRECTORY, FILE_ };

/* The parent directory of path (absolute, not "/"), its missing components made 0755;
 * *leaf points at the last component in path. */
static int open_parent(const char *path, const char **leaf)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (path[0] != '/' || len < 2 || len >= sizeof buf || path[len - 1] == '/') {
        errno = EINVAL;
        return -1;
    }
    memcpy(buf, path, len + 1);
    int dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    char *p = buf + 1;
    for (char *slash; (slash = strchr(p, '/')) != NULL; p = slash + 1) {
        *slash = '\0';
        if (!*p || !strcmp(p, ".") || !strcmp(p, "..")) {
            (void)close(dfd);
            errno = EINVAL;
            return -1;
        }
        int nd = openat(dfd, p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (nd < 0 && errno == ENOENT &&
            (mkdirat(dfd, p, 0755) == 0 || errno == EEXIST))
            nd = openat(dfd, p, O_PATH | O_DIRECTORY | O_CLOEXEC);
        close_keep_errno(dfd);
        if (nd < 0)
            return -1;
        dfd = nd;
    }
    if (!strcmp(p, ".") || !strcmp(p, "..")) {
        (void)close(dfd);
        errno = EINVAL;
        return -1;
    }
    *leaf = path + (p - buf);
    return dfd;
}

/* The entry at path as an O_PATH fd, made first when missing and `want` says what
 * (a directory with `mode`, or an empty file 0444); never a symbolic link, and of the
 * type wanted. */
static int open_target(const char *path, enum want want, unsigned long long mode)
{
    const char *leaf;
    int dfd = open_parent(path, &leaf);
    if (dfd < 0)
        return -1;
    int fd = openat(dfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && want != EXISTING) {
        int made = -1;
        if (want == DIRECTORY) {
            made = mkdirat(dfd, leaf, (mode_t)mode);
        } else {
            int f = openat(dfd, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                           0444);
            if (f >= 0)
                made = close(f);
        }
        if (made == 0 || errno == EEXIST)
            fd = openat(dfd, leaf, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    }
    close_keep_errno(dfd);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        close_keep_errno(fd);
        return -1;
    }
    int bad = S_ISLNK(st.st_mode)                              ? ELOOP
              : want == DIRECTORY && !S_ISDIR(st.st_mode)      ? ENOTDIR
              : want == FILE_ && S_ISDIR(st.st_mode)           ? EISDIR
                                                               : 0;
    if (bad) {
        (void)close(fd);
        errno = bad;
        return -1;
    }
    return fd;
}

/* ---------------------------------------------------------------- applying */

static int apply_one(const a3s_setup_host_op *o, int src, bool src_dir)
{
    int t = -1, m = -1, rc = 0;
    if (is(o, "mnt-dir")) {
        if ((t = open_target(o->path, DIRECTORY, o->arg)) < 0)
            rc = a3s_setup_fail("directory %s: %s", o->path, strerror(errno));
    } else if (is(o, "mnt-tmpfs")) {
        if ((t = open_target(o->path, DIRECTORY, 0755)) < 0)
            rc = a3s_setup_fail("tmpfs on %s: %s", o->path, strerror(errno));
        else if ((m = make_tmpfs(o->arg)) < 0 || move_mount_fd(m, t) < 0)
            rc = a3s_setup_fail("tmpfs on %s: %s", o->path, strerror(errno));
    } else if (is(o, "mnt-bind") || is(o, "mnt-null")) {
        if ((t = open_target(o->path, src_dir ? DIRECTORY : FILE_, 0755)) < 0 ||
            move_mount_fd(src, t) < 0)
            rc = a3s_setup_fail("%s onto %s: %s", is(o, "mnt-null") ? "/dev/null" : "bind",
                        o->path, strerror(errno));
    } else if (is(o, "mnt-ro")) {
        /* This mount only, as bubblewrap's --remount-ro (the binds in it are already). */
        if ((t = open_target(o->path, EXISTING, 0)) < 0 ||
            mount_setattr_fd(t, 0, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                             0) < 0)
            rc = a3s_setup_fail("read-only %s: %s", o->path, strerror(errno));
    } else {
        rc = a3s_setup_fail("unknown host mount record '%s'", o->kind);
    }
    if (m >= 0)
        (void)close(m);
    if (t >= 0)
        (void)close(t);
    return rc;
}

int a3s_setup_host_apply(const a3s_setup_host_op *ops, size_t n)
{
    if (n == 0)
        return 0;
    int *src = malloc(n * sizeof *src);
    bool *dir = calloc(n, sizeof *dir);
    if (!src || !dir) {
        free(src);
        free(dir);
        return a3s_setup_fail("out of memory");
    }
    int rc = 0;
    for (size_t i = 0; i < n; i++)
        src[i] = -1;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const a3s_setup_host_op *o = &ops[i];
        bool moded = is(o, "mnt-tmpfs") || is(o, "mnt-dir");
        if ((moded && o->arg > 07777) || (is(o, "mnt-bind") && o->arg > 7) ||
            (!moded && !is(o, "mnt-bind") && o->arg != 0))
            rc = a3s_setup_fail("bad host mount record %s %s %llu", o->kind, o->path, o->arg);
    }
    /* Every source first, from the host's view as it is before any of these mounts. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (is(&ops[i], "mnt-bind"))
            rc = (src[i] = clone_source(&ops[i], &dir[i])) < 0 ? -1 : 0;
        else if (is(&ops[i], "mnt-null"))
            rc = (src[i] = clone_null()) < 0 ? -1 : 0;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = apply_one(&ops[i], src[i], dir[i]);
    for (size_t i = 0; i < n; i++)
        if (src[i] >= 0)
            (void)close(src[i]);
    free(src);
    free(dir);
    return rc;
}
