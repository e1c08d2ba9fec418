/* The per-user state directory and crash-safe scratch directories.
 *
 * Every record is a file in <root>/a3s-sandbox-state-<euid> (0700, ours, not writable
 * by anyone else), accessed relative to the directory fd and never through a symbolic
 * link. An owner proves it is alive by holding an OFD write lock on its owner file:
 * unlike a pid (reused) or a pid plus start time (meaningless across pid namespaces and
 * reboots), the lock disappears exactly when the last descriptor of the owner goes, and
 * owner fds are O_CLOEXEC, so a sandboxed child never inherits one past execve.
 *
 * A scratch owner file "scratch-<random>" holds the scratch path and a final newline.
 * The owner creates it, locks it, then writes the path, so a sweeper that gets the lock
 * on a file without the newline may be racing a creator between open and lock: such a
 * file is only removed once it is old, and never leads to a directory removal. */
#include "stale.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH_PREFIX "a3s-sandbox-"
#define OWNER_PREFIX "scratch-"
/* An owner file still without its path after this long belongs to a dead creator. */
#define OWNER_GRACE_S 60

/* ---------------------------------------------------------------- state directory */

const char *a3s_stale_root(const char *tmp)
{
    /* 0 unknown, 1 usable, 2 not usable: one check per process is enough. */
    static atomic_int tmp_state;
    int s = atomic_load(&tmp_state);
    if (s == 0) {
        struct stat st;
        bool usable = stat("/tmp", &st) == 0 && S_ISDIR(st.st_mode) &&
                      faccessat(AT_FDCWD, "/tmp", W_OK | X_OK, AT_EACCESS) == 0;
        s = usable ? 1 : 2;
        atomic_store(&tmp_state, s);
    }
    if (s == 1 || !tmp)
        return "/tmp";
    return tmp;
}

int a3s_stale_state_open(const char *root, bool create, a3s_error *err)
{
    char path[PATH_MAX];
    if (!root || root[0] != '/')
        return a3s_fail(err, A3S_ERR_SETUP, "state directory root '%s' is not absolute",
                        root ? root : "(null)");
    int n = snprintf(path, sizeof path, "%s%sa3s-sandbox-state-%lu", root,
                     strcmp(root, "/") == 0 ? "" : "/", (unsigned long)geteuid());
    if (n < 0 || (size_t)n >= sizeof path)
        return a3s_fail(err, A3S_ERR_SETUP, "state directory under %s: path too long", root);
    /* Open first: the directory exists on all but the first run. */
    bool made = false;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdir(path, 0700) == 0)
            made = true;
        else if (errno != EEXIST)
            return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot create state directory %s",
                                  path);
        fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0) {
        int saved = errno;
        if (!create && saved == ENOENT)
            return -2;
        if (saved == ELOOP || saved == ENOTDIR)
            return a3s_fail(err, A3S_ERR_SETUP,
                            "refusing state directory %s: a symbolic link or not a directory",
                            path);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot open state directory %s", path);
    }
    /* A umask may have narrowed our mkdir; the mode must let us work in it. */
    if (made)
        (void)fchmod(fd, 0700);
    struct stat st;
    const char *why = NULL;
    if (fstat(fd, &st) < 0) {
        int saved = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot stat state directory %s", path);
    }
    if (!S_ISDIR(st.st_mode))
        why = "not a directory";
    else if (st.st_uid != geteuid())
        why = "owned by another user";
    else if (st.st_mode & (S_IWGRP | S_IWOTH))
        why = "writable by group or others";
    if (why) {
        close(fd);
        return a3s_fail(err, A3S_ERR_SETUP, "refusing state directory %s: %s", path, why);
    }
    return fd;
}

/* ---------------------------------------------------------------- helpers */

/* A fresh random hex name: getrandom, or (without entropy yet) pid, time and a counter,
 * which only need to be unique, not secret: names are created with O_EXCL. */
static void random_hex(char *out, size_t nbytes)
{
    static atomic_uint counter;
    unsigned char b[16];
    if (nbytes > sizeof b)
        nbytes = sizeof b;
    if (getrandom(b, nbytes, GRND_NONBLOCK) != (ssize_t)nbytes) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        unsigned long long x = ((unsigned long long)getpid() << 32) ^
                               (unsigned long long)ts.tv_nsec ^
                               ((unsigned long long)ts.tv_sec << 20) ^
                               ((unsigned long long)atomic_fetch_add(&counter, 1) << 48);
        for (size_t i = 0; i < nbytes; i++)
            b[i] = (unsigned char)(x >> (8 * (i % 8))) ^ (unsigned char)(i * 131u);
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[b[i] >> 4];
        out[2 * i + 1] = hex[b[i] & 15];
    }
    out[2 * nbytes] = '\0';
}

#define LOCK_WAIT_NS (10ULL * 1000 * 1000 * 1000)

int a3s_stale_lock(int fd, short type, off_t start, off_t len, bool wait)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    /* Polling with a growing pause instead of F_OFD_SETLKW: bounded. Holds last a few
     * syscalls, so the first retries come quickly. */
    unsigned long long waited = 0, pause_ns = 100 * 1000;
    for (;;) {
        if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (!wait || (errno != EAGAIN && errno != EACCES))
            return -1;
        if (waited >= LOCK_WAIT_NS) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)pause_ns};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
        }
        waited += pause_ns;
        if (pause_ns < 20 * 1000 * 1000)
            pause_ns *= 2;
    }
}

void a3s_stale_lock_close(int fd)
{
    (void)a3s_stale_lock(fd, F_UNLCK, 0, 0, false);
    close(fd);
}

/* Unlink `name` in dfd only if it is still the inode open as fd. */
static void unlink_if_same(int dfd, const char *name, int fd)
{
    struct stat a, b;
    if (fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        (void)unlinkat(dfd, name, 0);
}

/* The last component of an absolute scratch path, or NULL if it is not one. */
static const char *scratch_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (path[0] != '/' || !slash ||
        strncmp(slash + 1, SCRATCH_PREFIX, strlen(SCRATCH_PREFIX)) != 0 ||
        slash[1 + strlen(SCRATCH_PREFIX)] == '\0')
        return NULL;
    return slash + 1;
}

/* ---------------------------------------------------------------- scratch ownership */

struct owner {
    char *path;                          /* the scratch directory */
    char name[sizeof OWNER_PREFIX + 32]; /* the owner file in the state directory */
    int statefd, fd;
    struct owner *next;
};

static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;
static struct owner *owners; /* guarded by owners_lock */

static void owner_free(struct owner *o)
{
    if (o->fd >= 0)
        a3s_stale_lock_close(o->fd);
    if (o->statefd >= 0)
        close(o->statefd);
    free(o->path);
    free(o);
}

int a3s_stale_scratch_own(const char *root, const char *scratch, a3s_error *err)
{
    if (!scratch || !scratch_base(scratch) || strlen(scratch) >= PATH_MAX)
        return a3s_fail(err, A3S_ERR_INVALID, "scratch '%s' is not an a3s-sandbox directory",
                        scratch ? scratch : "(null)");
    struct owner *o = calloc(1, sizeof *o);
    if (!o || !(o->path = a3s_strdup(scratch))) {
        free(o);
        return a3s_fail(err, A3S_ERR_INTERNAL, "scratch owner: out of memory");
    }
    o->fd = -1;
    o->statefd = a3s_stale_state_open(root, true, err);
    if (o->statefd < 0) {
        owner_free(o);
        return -1;
    }
    for (int tries = 0; o->fd < 0; tries++) {
        char rnd[33];
        random_hex(rnd, 16);
        snprintf(o->name, sizeof o->name, OWNER_PREFIX "%s", rnd);
        o->fd =
            openat(o->statefd, o->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (o->fd < 0 && (errno != EEXIST || tries >= 8)) {
            int saved = errno;
            owner_free(o);
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot record the owner of %s",
                                  scratch);
        }
    }
    /* Lock before the path goes in: a sweeper never mistakes a complete record of ours
     * for a dead one. Waiting only covers a sweeper probing this very file. */
    size_t len = strlen(scratch);
    int rc = a3s_stale_lock(o->fd, F_WRLCK, 0, 0, true);
    if (rc == 0 && ((rc = a3s_write_all(o->fd, scratch, len)) == 0))
        rc = a3s_write_all(o->fd, "\n", 1);
    if (rc < 0) {
        int saved = errno;
        (void)unlinkat(o->statefd, o->name, 0);
        owner_free(o);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot record the owner of %s", scratch);
    }
    pthread_mutex_lock(&owners_lock);
    o->next = owners;
    owners = o;
    pthread_mutex_unlock(&owners_lock);
    return 0;
}

void a3s_stale_scratch_disown(const char *scratch)
{
    if (!scratch)
        return;
    struct owner *o = NULL;
    pthread_mutex_lock(&owners_lock);
    for (struct owner **pp = &owners; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->path, scratch) == 0) {
            o = *pp;
            *pp = o->next;
            break;
        }
    }
    pthread_mutex_unlock(&owners_lock);
    if (!o)
        return;
    /* Unlink while still locked: nobody can take the name for a dead owner meanwhile. */
    unlink_if_same(o->statefd, o->name, o->fd);
    owner_free(o);
}

/* ---------------------------------------------------------------- sweep */

/* Remove the scratch directory at path if it is a directory of ours (best effort).
 * false when it is still there: the record is kept, so that a later sweep tries again
 * (the dead run's sandbox may still be going away). */
static bool remove_dead_scratch(const char *path)
{
    const char *base = scratch_base(path);
    if (!base)
        return true;
    char parent[PATH_MAX];
    size_t plen = (size_t)(base - 1 - path);
    if (plen >= sizeof parent)
        return true;
    memcpy(parent, path, plen);
    parent[plen] = '\0';
    int dfd = open(plen ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return true;
    struct stat st;
    bool gone = true;
    if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == geteuid())
        gone = a3s_rmtree_at(dfd, base) == 0 ||
               (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
    close(dfd);
    return gone;
}

/* One owner file: leave it if its owner lives, else clean up after it. */
static void sweep_owner(int statefd, const char *name)
{
    int fd = openat(statefd, name, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return;
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        a3s_stale_lock(fd, F_WRLCK, 0, 0, false) < 0) {
        close(fd); /* alive (EAGAIN), or not a record of ours */
        return;
    }
    char buf[PATH_MAX + 2];
    size_t n = 0;
    for (ssize_t r; n < sizeof buf && (r = a3s_read_retry(fd, buf + n, sizeof buf - n)) > 0;)
        n += (size_t)r;
    if (n > 0 && n < sizeof buf && buf[n - 1] == '\n' && memchr(buf, '\n', n) == buf + n - 1 &&
        memchr(buf, '\0', n) == NULL) {
        buf[n - 1] = '\0';
        if (!remove_dead_scratch(buf)) {
            a3s_stale_lock_close(fd);
            return;
        }
    } else {
        /* Incomplete: a creator between open and lock, or one that died there. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec - st.st_mtim.tv_sec < OWNER_GRACE_S) {
            a3s_stale_lock_close(fd);
            return;
        }
    }
    unlink_if_same(statefd, name, fd);
    a3s_stale_lock_close(fd);
}

void a3s_stale_foreach(const char *root, const char *prefix,
                       void (*fn)(int statefd, const char *name, void *ud), void *ud)
{
    int statefd = a3s_stale_state_open(root, false, NULL);
    if (statefd < 0)
        return;
    /* closedir closes the fd it reads: give it its own, statefd stays for the *at calls. */
    int dfd = fcntl(statefd, F_DUPFD_CLOEXEC, 0);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        close(statefd);
        return;
    }
    size_t plen = strlen(prefix);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, prefix, plen) == 0)
            fn(statefd, e->d_name, ud);
    closedir(d);
    close(statefd);
}

static void sweep_owner_cb(int statefd, const char *name, void *ud)
{
    (void)ud;
    sweep_owner(statefd, name);
}

void a3s_stale_sweep(const char *root)
{
    a3s_stale_foreach(root, OWNER_PREFIX, sweep_owner_cb, NULL);
}
