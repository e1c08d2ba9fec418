/* The trusted setup step inside the sandbox (a3s-sandbox-launch --setup).
 *
 * bwrap has created the namespaces, the read-only view of the host root, /dev and /proc.
 * This step runs as uid 0 of the sandbox's user namespace with CAP_SYS_ADMIN (and nothing
 * else), before the seccomp filter and before any untrusted code. It
 *   0. makes the plan's mounts outside the workspace, in the plan's order (setup_host.c);
 *   1. checks that the workspace and scratch mounts are the very directories the
 *      supervisor opened and scanned (or mounts the idmapped clones it was handed);
 *   2. makes every workspace-relative mount by file descriptor: each target is resolved
 *      once below the workspace without following symbolic links (openat2
 *      RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS), checked against the identity the scan saw,
 *      and mounted onto with move_mount(MOVE_MOUNT_T_EMPTY_PATH), so no rename or
 *      exchange in a concurrent run can redirect a rule;
 *   3. verifies the result by resolving every path again: it must be exactly the mount
 *      that was made (same mount id);
 *   4. drops to the command's identity in a nested user namespace with no capabilities
 *      (setup_identity.c), sets no_new_privs and installs the command's seccomp filter.
 * Any failure ends the run before the command starts (exit 125, message on stderr). */
#include "setup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#ifndef STATX_TYPE
#include <linux/stat.h> /* struct statx: musl before 1.2.5 declares none */
#endif
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mountinfo.h"
#include "protocol.h"
#include "setup_host.h"
#include "setup_identity.h"

#define MAX_OPS 65536

typedef struct op {
    char kind[12];
    const char *path;
    unsigned long long a, b, c, d;
    int mnt_fd_num;        /* root/scratch with source 1 */
    unsigned long long mnt_id; /* of the mount we made, for the final check */
    dev_t dev;             /* what the target was before (protect/ro/rw/hold) */
    ino_t ino;
    bool applied;
} op;

int a3s_setup_vfail(const char *fmt, va_list ap)
{
    fputs("a3s-sandbox: setup: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    return -1;
}

int a3s_setup_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    a3s_setup_vfail(fmt, ap);
    va_end(ap);
    return -1;
}

int a3s_setup_openat2(int dfd, const char *path, int flags, unsigned long long resolve)
{
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC), .resolve = resolve};
    int fd;
    /* RESOLVE_* lookups return EAGAIN when a rename raced with them: retry a little. */
    for (int i = 0; i < 64; i++) {
        fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof how);
        if (fd >= 0 || errno != EAGAIN)
            break;
    }
    return fd;
}

static int sys_open_tree(int dfd, const char *path, unsigned flags)
{
    return (int)syscall(SYS_open_tree, dfd, path, flags);
}

static int sys_move_mount_fd(int from, int to)
{
    return (int)syscall(SYS_move_mount, from, "", to, "",
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
}

static int sys_mount_setattr(int fd, unsigned flags, unsigned long long set,
                             unsigned long long clr)
{
    struct mount_attr a = {.attr_set = set, .attr_clr = clr};
    return (int)syscall(SYS_mount_setattr, fd, "", flags | AT_EMPTY_PATH, &a, sizeof a);
}

int a3s_setup_mnt_id(int fd, unsigned long long *id)
{
    struct statx sx;
    /* The system call itself: not every C library the launcher is linked with wraps it. */
    if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &sx) < 0)
        return -1;
    if (!(sx.stx_mask & STATX_MNT_ID)) {
        errno = ENOSYS;
        return -1;
    }
    *id = sx.stx_mnt_id;
    return 0;
}

/* ---------------------------------------------------------------- records */

static char *read_all(int fd, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return NULL;
    for (;;) {
        if (n == cap) {
            if (cap >= A3S_SETUP_MAX_BYTES) {
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        ssize_t got = read(fd, buf + n, cap - n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            free(buf);
            return NULL;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static bool parse_num(const char *s, unsigned long long *out)
{
    char *end;
    errno = 0;
    if (!*s || *s == '-')
        return false;
    *out = strtoull(s, &end, 10);
    return errno == 0 && *end == '\0';
}

static int parse_ops(char *buf, size_t len, op **out, size_t *nout)
{
    const char *f[A3S_SETUP_FIELDS];
    size_t pos = strlen(buf) + 1;
    if (pos > len || strcmp(buf, A3S_SETUP_MAGIC) != 0)
        return a3s_setup_fail("the setup records are not of this version");
    /* As many records as the buffer holds (each has A3S_SETUP_FIELDS NULs), never a
     * table of MAX_OPS: zeroing megabytes would cost milliseconds on every run. */
    size_t fields = 0;
    for (size_t i = pos; i < len; i++)
        fields += buf[i] == '\0';
    size_t cap = fields / A3S_SETUP_FIELDS + 1;
    if (cap > MAX_OPS)
        cap = MAX_OPS;
    op *ops = calloc(cap, sizeof *ops);
    if (!ops)
        return a3s_setup_fail("out of memory");
    size_t n = 0;
    while (pos < len) {
        for (int i = 0; i < A3S_SETUP_FIELDS; i++) {
            if (pos >= len) {
                free(ops);
                return a3s_setup_fail("truncated setup record");
            }
            f[i] = buf + pos;
            pos += strlen(buf + pos) + 1;
        }
        if (n == cap || strlen(f[0]) >= sizeof ops[n].kind) {
            free(ops);
            return a3s_setup_fail("bad setup record");
        }
        op *o = &ops[n++];
        memcpy(o->kind, f[0], strlen(f[0]) + 1);
        o->path = f[1];
        if (!parse_num(f[2], &o->a) || !parse_num(f[3], &o->b) || !parse_num(f[4], &o->c) ||
            !parse_num(f[5], &o->d)) {
            free(ops);
            return a3s_setup_fail("bad number in setup record %s %s", f[0], f[1]);
        }
    }
    if (n == 0 || strcmp(ops[n - 1].kind, "ids") != 0) {
        free(ops);
        return a3s_setup_fail("the setup records do not end with the identity");
    }
    *out = ops;
    *nout = n;
    return 0;
}

/* ---------------------------------------------------------------- mount sources */

/* A read-only, nodev clone of /dev/null, checked to be the null device (a mask must
 * never land on something that reads back data). nodev: opening it fails (EACCES), so a
 * masked file is unreadable rather than empty. */
static int null_source(void)
{
    int fd = a3s_setup_openat2(AT_FDCWD, "/dev/null", O_PATH,
                         RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
        if (fd >= 0)
            close(fd);
        return a3s_setup_fail("/dev/null is not the null device");
    }
    int src = sys_open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    int e = errno;
    close(fd);
    if (src < 0)
        return a3s_setup_fail("cloning /dev/null: %s", strerror(e));
    if (sys_mount_setattr(src, 0,
                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                              MOUNT_ATTR_NOEXEC,
                          0) < 0) {
        e = errno;
        close(src);
        return a3s_setup_fail("/dev/null mount attributes: %s", strerror(e));
    }
    return src;
}

/* A fresh tmpfs, detached: read-only and empty (mask) or writable (tmpfs rules). */
static int tmpfs_source(bool writable)
{
    int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return a3s_setup_fail("tmpfs: %s", strerror(errno));
    const char *mode = writable ? "1777" : "0755";
    int m = -1;
    if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", mode, 0) < 0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", writable ? "50%" : "4k", 0) <
            0 ||
        syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
        (m = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                          MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                              (writable ? 0 : MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC))) < 0) {
        int e = errno;
        close(fs);
        return a3s_setup_fail("tmpfs: %s", strerror(e));
    }
    close(fs);
    return m;
}

enum { KEEP_ATTRS = 0, READ_ONLY = 1, READ_WRITE = 2 };

/* A clone of the tree at fd: the bind of an entry onto itself. KEEP_ATTRS keeps what
 * covers it (a held directory inside a read-only one stays read-only). */
static int self_source(int fd, int mode)
{
    int src = sys_open_tree(fd, "",
                            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (src < 0)
        return -1;
    unsigned long long set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
    unsigned long long clr = 0;
    if (mode == READ_ONLY)
        set |= MOUNT_ATTR_RDONLY;
    else if (mode == READ_WRITE)
        clr = MOUNT_ATTR_RDONLY;
    if (sys_mount_setattr(src, AT_RECURSIVE, set, clr) < 0) {
        int e = errno;
        close(src);
        errno = e;
        return -1;
    }
    return src;
}

/* ---------------------------------------------------------------- applying records */

typedef struct ctx {
    int wsfd;     /* the workspace mount's root, once checked */
    int null_src; /* lazily made */
    int mask_fs;  /* an empty read-only tmpfs, cloned per masked directory */
    const char *ws;
} ctx;

static const unsigned long long beneath = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                          RESOLVE_NO_MAGICLINKS;

/* The workspace or the scratch directory: an absolute path that must resolve without
 * any symbolic link to the directory the supervisor opened. */
static int apply_root(ctx *c, op *o, int *out_fd)
{
    int t = a3s_setup_openat2(AT_FDCWD, o->path, O_PATH | O_DIRECTORY | O_NOFOLLOW,
                        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (t < 0)
        return a3s_setup_fail("%s %s: %s (it changed during setup)", o->kind, o->path, strerror(errno));
    if (o->c == 1) {
        int src = strcmp(o->kind, "root") == 0 ? A3S_FD_WS_MOUNT : A3S_FD_SCRATCH_MOUNT;
        if (a3s_setup_mnt_id(src, &o->mnt_id) < 0 || sys_move_mount_fd(src, t) < 0) {
            int e = errno;
            close(t);
            return a3s_setup_fail("mounting the %s at %s: %s", o->kind, o->path, strerror(e));
        }
        close(src);
        close(t);
        t = a3s_setup_openat2(AT_FDCWD, o->path, O_PATH | O_DIRECTORY | O_NOFOLLOW,
                        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (t < 0)
            return a3s_setup_fail("%s %s: %s (it changed during setup)", o->kind, o->path,
                        strerror(errno));
        /* The supervisor cloned it on the host (an idmapped mount): where the host's
         * mounts are shared, the clone is a peer of the host's, and every mount made
         * below it here would appear on the host too, and stay there. Private before
         * anything is mounted below it. */
        struct mount_attr priv = {.propagation = MS_PRIVATE};
        if (syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH | AT_RECURSIVE, &priv,
                    sizeof priv) < 0) {
            int e = errno;
            close(t);
            return a3s_setup_fail("making the %s's mount private: %s", o->kind, strerror(e));
        }
    } else {
        /* bwrap bound it by path: it must be a mount of its own, of that directory. */
        int parent = openat(t, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
        unsigned long long pid = 0;
        if (parent < 0 || a3s_setup_mnt_id(parent, &pid) < 0 || a3s_setup_mnt_id(t, &o->mnt_id) < 0 ||
            pid == o->mnt_id) {
            if (parent >= 0)
                close(parent);
            close(t);
            return a3s_setup_fail("%s %s is not the mount that was made for it", o->kind, o->path);
        }
        close(parent);
    }
    struct stat st;
    if (fstat(t, &st) < 0 || st.st_dev != (dev_t)o->a || st.st_ino != (ino_t)o->b) {
        close(t);
        return a3s_setup_fail("%s %s is not the directory that was checked: it changed during setup",
                    o->kind, o->path);
    }
    o->applied = true;
    *out_fd = t;
    (void)c;
    return 0;
}

static bool is_kind(const op *o, const char *k)
{
    return strcmp(o->kind, k) == 0;
}

/* A session's command (join.c): the workspace (C=0) or the command's scratch directory
 * (C=1) as the session's base shows it, cloned before anything is mounted over its path,
 * checked to be the directory the supervisor opened, and left where the root or scratch
 * record takes a detached mount (as a root caller's idmapped one). D=1: read-only. */
static int apply_clone(op *o)
{
    if (o->c > 1)
        return a3s_setup_fail("bad clone record %s", o->path);
    int t = a3s_setup_openat2(AT_FDCWD, o->path, O_PATH | O_DIRECTORY | O_NOFOLLOW,
                        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (t < 0)
        return a3s_setup_fail("%s: %s (it changed before setup)", o->path, strerror(errno));
    int src = sys_open_tree(t, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH |
                                       AT_RECURSIVE);
    int e = errno;
    close(t);
    if (src < 0)
        return a3s_setup_fail("cloning %s: %s", o->path, strerror(e));
    struct stat st;
    int slot = o->c == 0 ? A3S_FD_WS_MOUNT : A3S_FD_SCRATCH_MOUNT;
    int rc = 0;
    if (fstat(src, &st) < 0 || st.st_dev != (dev_t)o->a || st.st_ino != (ino_t)o->b)
        rc = a3s_setup_fail("%s is not the directory that was checked: it changed before setup",
                  o->path);
    else if (sys_mount_setattr(src, AT_RECURSIVE,
                               MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                   ((o->d & 1) ? MOUNT_ATTR_RDONLY : 0),
                               0) < 0 ||
             (!(o->d & 1) && sys_mount_setattr(src, 0, 0, MOUNT_ATTR_RDONLY) < 0))
        rc = a3s_setup_fail("mount attributes of %s: %s", o->path, strerror(errno));
    else if (dup2(src, slot) < 0)
        rc = a3s_setup_fail("dup2: %s", strerror(errno));
    close(src);
    return rc;
}

static int apply_entry(ctx *c, op *o)
{
    if (c->wsfd < 0)
        return a3s_setup_fail("workspace record missing before %s %s", o->kind, o->path);
    int t = a3s_setup_openat2(c->wsfd, o->path, O_PATH | O_NOFOLLOW, beneath);
    if (t < 0) {
        if ((errno == ENOENT || errno == ENOTDIR) && (o->c & A3S_SETUP_OPTIONAL) && !o->a &&
            !o->b)
            return 0;
        if (errno == ELOOP)
            return a3s_setup_fail("refusing a symbolic link at %s/%s", c->ws, o->path);
        return a3s_setup_fail("%s/%s: %s (the workspace changed during setup)", c->ws, o->path,
                    strerror(errno));
    }
    struct stat st;
    if (fstat(t, &st) < 0) {
        int e = errno;
        close(t);
        return a3s_setup_fail("%s/%s: %s", c->ws, o->path, strerror(e));
    }
    if (S_ISLNK(st.st_mode)) {
        close(t);
        return a3s_setup_fail("refusing a symbolic link at %s/%s", c->ws, o->path);
    }
    if ((o->a || o->b) && (st.st_dev != (dev_t)o->a || st.st_ino != (ino_t)o->b)) {
        close(t);
        return a3s_setup_fail("%s/%s is not the entry that was scanned: the workspace changed during "
                    "setup", c->ws, o->path);
    }
    bool dir = S_ISDIR(st.st_mode);
    if ((o->d == A3S_SETUP_T_DIR && !dir) || (o->d == A3S_SETUP_T_NONDIR && dir)) {
        close(t);
        return a3s_setup_fail("%s/%s changed type during setup", c->ws, o->path);
    }
    o->dev = st.st_dev;
    o->ino = st.st_ino;
    int src = -1;
    if (is_kind(o, "protect") || is_kind(o, "ro"))
        src = self_source(t, READ_ONLY);
    else if (is_kind(o, "rw"))
        src = self_source(t, READ_WRITE);
    else if (is_kind(o, "hold"))
        src = self_source(t, KEEP_ATTRS);
    else if (is_kind(o, "mask") && dir) {
        if (c->mask_fs < 0 && (c->mask_fs = tmpfs_source(false)) < 0) {
            close(t);
            return -1;
        }
        src = sys_open_tree(c->mask_fs, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    } else if (is_kind(o, "mask")) {
        if (c->null_src < 0 && (c->null_src = null_source()) < 0) {
            close(t);
            return -1;
        }
        src = sys_open_tree(c->null_src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    } else if (is_kind(o, "tmpfs")) {
        if (!dir) {
            close(t);
            return a3s_setup_fail("tmpfs path %s/%s is not a directory", c->ws, o->path);
        }
        src = tmpfs_source(true);
        if (src < 0) {
            close(t);
            return -1;
        }
    } else {
        close(t);
        return a3s_setup_fail("unknown setup record '%s'", o->kind);
    }
    if (src < 0) {
        int e = errno;
        close(t);
        return a3s_setup_fail("%s %s/%s: %s", o->kind, c->ws, o->path, strerror(e));
    }
    int rc = 0;
    if (a3s_setup_mnt_id(src, &o->mnt_id) < 0 || sys_move_mount_fd(src, t) < 0)
        rc = a3s_setup_fail("%s %s/%s: %s", o->kind, c->ws, o->path, strerror(errno));
    else
        o->applied = true;
    close(src);
    close(t);
    return rc;
}

/* Resolve every path again: it must now be exactly the mount made for it. */
static int verify(ctx *c, op *ops, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        op *o = &ops[i];
        if (!o->applied)
            continue;
        bool rootish = is_kind(o, "root") || is_kind(o, "scratch");
        int t = rootish ? a3s_setup_openat2(AT_FDCWD, o->path, O_PATH | O_NOFOLLOW,
                                      RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
                        : a3s_setup_openat2(c->wsfd, o->path, O_PATH | O_NOFOLLOW, beneath);
        unsigned long long id = 0;
        struct stat st;
        bool ok = t >= 0 && a3s_setup_mnt_id(t, &id) == 0 && id == o->mnt_id && fstat(t, &st) == 0;
        if (ok && (is_kind(o, "protect") || is_kind(o, "ro") || is_kind(o, "rw") ||
                   is_kind(o, "hold")))
            ok = st.st_dev == o->dev && st.st_ino == o->ino;
        if (ok && is_kind(o, "mask") && !S_ISDIR(st.st_mode))
            ok = S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
        if (ok && (is_kind(o, "protect") || is_kind(o, "ro") || is_kind(o, "mask"))) {
            /* Read-only must hold for the mount itself. */
            struct statvfs vf;
            ok = fstatvfs(t, &vf) == 0 && (vf.f_flag & ST_RDONLY);
        }
        if (t >= 0)
            close(t);
        if (!ok)
            return a3s_setup_fail("%s %s%s%s did not end up where it was mounted: the workspace changed "
                        "during setup", o->kind, rootish ? "" : c->ws, rootish ? "" : "/",
                        o->path);
    }
    return 0;
}

/* After the view is private: no mount below the workspace but the ones made here. One
 * the host made after the policy read its mount table (which refuses a workspace holding
 * one) could have arrived until now, writable and unhidden. */
typedef struct foreign {
    const ctx *c;
    const op *ops;
    size_t n;
} foreign;

static int foreign_one(void *ud, const a3s_mountinfo *m)
{
    const foreign *f = ud;
    size_t wl = strlen(f->c->ws);
    if (strncmp(m->point, f->c->ws, wl) != 0 || m->point[wl] != '/')
        return 0;
    for (size_t i = 0; i < f->n; i++)
        if (f->ops[i].applied && f->ops[i].mnt_id == m->id)
            return 0;
    (void)a3s_setup_fail("a mount at %s appeared in the workspace during setup", m->point);
    return 1; /* said */
}

static int no_foreign_mounts(const ctx *c, const op *ops, size_t n)
{
    if (c->wsfd < 0)
        return 0;
    foreign f = {c, ops, n};
    int rc = a3s_mountinfo_each(foreign_one, &f);
    if (rc < 0)
        return a3s_setup_fail("reading the mount table: %s", strerror(errno));
    return rc ? -1 : 0;
}

static int install_filter(void)
{
    size_t len = 0;
    char *buf = read_all(A3S_FD_SECCOMP, &len);
    if (!buf)
        return a3s_setup_fail("reading the seccomp filter: %s", strerror(errno));
    if (len == 0 || len % sizeof(struct sock_filter) ||
        len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
        free(buf);
        return a3s_setup_fail("the seccomp filter is not a BPF program");
    }
    struct sock_fprog prog = {(unsigned short)(len / sizeof(struct sock_filter)),
                              (struct sock_filter *)(void *)buf};
    int rc = 0;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
        rc = a3s_setup_fail("installing the seccomp filter: %s", strerror(errno));
    free(buf);
    return rc;
}

/* A "limit" record: one of the plan's resource limits, soft and hard, as the supervisor
 * sets them when it starts the sandbox. Set again here, since a sandbox started ahead of
 * its plan was started with the caller's. */
static int apply_limit(const op *o)
{
    int res = !strcmp(o->path, "nofile") ? RLIMIT_NOFILE
              : !strcmp(o->path, "core") ? RLIMIT_CORE
              : !strcmp(o->path, "fsize") ? RLIMIT_FSIZE
                                          : -1;
    if (res < 0)
        return a3s_setup_fail("no such limit: %s", o->path);
    struct rlimit rl = {(rlim_t)o->a, (rlim_t)o->a};
    if (setrlimit(res, &rl) < 0)
        return a3s_setup_fail("the %s limit: %s", o->path, strerror(errno));
    return 0;
}

/* The leading host mount records (the mounts outside the workspace), in their order. */
static int apply_host(const op *ops, size_t n)
{
    if (n == 0)
        return 0;
    a3s_setup_host_op *h = calloc(n, sizeof *h);
    if (!h)
        return a3s_setup_fail("out of memory");
    for (size_t i = 0; i < n; i++)
        h[i] = (a3s_setup_host_op){ops[i].kind, ops[i].path, ops[i].a};
    int rc = a3s_setup_host_apply(h, n);
    free(h);
    return rc;
}

int a3s_setup_run(bool keep_relay_fds, bool joined)
{
    size_t len = 0;
    char *buf = read_all(A3S_FD_SETUP, &len);
    if (!buf)
        return a3s_setup_fail("reading the setup records: %s", strerror(errno));
    op *ops = NULL;
    size_t n = 0;
    if (parse_ops(buf, len, &ops, &n) < 0) {
        free(buf);
        return -1;
    }
    ctx c = {.wsfd = -1, .null_src = -1, .mask_fs = -1, .ws = ""};
    int rc = 0, scratch_fd = -1;
    /* Before any mount: nothing made here reaches the host (where its mounts are shared,
     * bubblewrap's copies are its slaves, but a mount taken from the host as it is would
     * be a peer), and a mount the host makes from now on does not arrive here (it would
     * arrive writable, under a name the plan never hid; no_foreign_mounts checks the
     * workspace for one that came before). */
    struct mount_attr priv = {.propagation = MS_PRIVATE};
    if (syscall(SYS_mount_setattr, AT_FDCWD, "/", AT_RECURSIVE, &priv, sizeof priv) < 0)
        rc = a3s_setup_fail("making the sandbox's mounts private: %s", strerror(errno));
    if (rc == 0 && !joined)
        rc = a3s_setup_harden();
    const char *cwd = NULL, *chdir_path = NULL;
    /* A session's command: its workspace and scratch directory, cloned from the base
     * before any mount hides their paths; then the mounts outside the workspace. */
    size_t first = 0;
    while (first + 1 < n && is_kind(&ops[first], "clone") && rc == 0)
        rc = apply_clone(&ops[first++]);
    size_t nhost = first;
    while (nhost + 1 < n && a3s_setup_host_is(ops[nhost].kind))
        nhost++;
    if (rc == 0)
        rc = apply_host(ops + first, nhost - first);
    for (size_t i = nhost; i + 1 < n && rc == 0; i++) {
        op *o = &ops[i];
        if (a3s_setup_host_is(o->kind) || is_kind(o, "clone")) {
            rc = a3s_setup_fail("%s %s after the workspace's records", o->kind, o->path);
        } else if (is_kind(o, "root")) {
            if (c.wsfd >= 0)
                rc = a3s_setup_fail("two workspace records");
            else if ((rc = apply_root(&c, o, &c.wsfd)) == 0)
                c.ws = o->path;
        } else if (is_kind(o, "chdir")) {
            chdir_path = o->path; /* entered by path once every mount is made */
        } else if (is_kind(o, "cwd")) {
            cwd = o->path; /* entered once every mount is made and verified */
        } else if (is_kind(o, "limit")) {
            rc = apply_limit(o);
        } else if (is_kind(o, "scratch")) {
            if (scratch_fd >= 0)
                rc = a3s_setup_fail("two scratch records");
            else
                rc = apply_root(&c, o, &scratch_fd);
        } else {
            rc = apply_entry(&c, o);
        }
    }
    if (rc == 0)
        rc = verify(&c, ops, n);
    /* Also in a session's command: its view was found without a mount below the
     * workspace when it was made, but a host rename moves a mount with its directory,
     * into the workspace too; and the mapped identity's workspace is cloned from the
     * host for the command. */
    if (rc == 0)
        rc = no_foreign_mounts(&c, ops, n);
    /* The command starts in the workspace mount (bwrap started in /). */
    if (rc == 0 && c.wsfd >= 0) {
        int d = openat(c.wsfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0 || fchdir(d) < 0)
            rc = a3s_setup_fail("entering the workspace: %s", strerror(errno));
        if (d >= 0)
            close(d);
    }
    /* A workspace that is not a mount of its own: entered by path, as the command sees it
     * (bwrap starts in /, below none of the mounts). */
    if (rc == 0 && c.wsfd < 0 && chdir_path && chdir(chdir_path) < 0)
        rc = a3s_setup_fail("entering the workspace %s: %s", chdir_path, strerror(errno));
    /* The command's working directory, below the workspace mount as the command sees it
     * (O_PATH: entering a directory needs only search permission). */
    if (rc == 0 && cwd) {
        int d = c.wsfd < 0 ? -1
                           : a3s_setup_openat2(c.wsfd, cwd, O_PATH | O_DIRECTORY,
                                         RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
        if (c.wsfd < 0)
            rc = a3s_setup_fail("the working directory %s: the workspace is not mounted", cwd);
        else if (d < 0 || fchdir(d) < 0)
            rc = a3s_setup_fail("the working directory %s: %s", cwd, strerror(errno));
        if (d >= 0)
            close(d);
    }
    if (c.wsfd >= 0)
        close(c.wsfd);
    if (scratch_fd >= 0)
        close(scratch_fd);
    if (c.null_src >= 0)
        close(c.null_src);
    if (c.mask_fs >= 0)
        close(c.mask_fs);
    if (rc == 0)
        rc = a3s_setup_identity((unsigned)ops[n - 1].a, (unsigned)ops[n - 1].b,
                                (unsigned)ops[n - 1].c, (unsigned)ops[n - 1].d);
    free(ops);
    free(buf);
    if (rc == 0)
        rc = install_filter();
    if (rc < 0)
        return -1;
    /* Nothing of the setup reaches the command: bwrap's args, the filter and the
     * records, the mount and namespace fds. The relay still needs its filter and
     * bwrap's status pipe (it hands them on itself). */
    if (keep_relay_fds) {
        (void)close(A3S_FD_ARGS);
        (void)close(A3S_FD_SECCOMP);
        (void)syscall(SYS_close_range, A3S_FD_SETUP, A3S_FD_MEDIATOR - 1, 0);
        /* The relay's channel, and the embedded images: the relay's is executed next (and
         * CLOEXEC, so gone with that exec), the launcher's is the relay's to start. */
        (void)syscall(SYS_close_range, A3S_FD_RELAY_IMAGE + 1, ~0U, 0);
        if (fcntl(A3S_FD_RELAY_IMAGE, F_SETFD, FD_CLOEXEC) < 0 && errno != EBADF)
            return a3s_setup_fail("the relay's image: %s", strerror(errno));
    } else {
        (void)syscall(SYS_close_range, A3S_FD_ARGS, ~0U, 0);
    }
    return 0;
}
