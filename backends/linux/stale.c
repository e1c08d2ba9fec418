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
#include "rmtree.h"
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
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"

#define SCRATCH_PREFIX "a3s-sandbox-"
#define OWNER_PREFIX "run-"
#define TOMB_PREFIX "tomb-" /* a swept run, whose tag is looked for a while longer */
#define TOMB_KEEP_S 60
#define LEGACY_PREFIX "scratch-" /* records of earlier versions: the scratch path alone */
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

static int state_open_at(const char *root, bool create, a3s_error *err)
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

/* Another user can take /tmp/a3s-sandbox-state-<uid> first (any user may create names
 * in /tmp, and the sticky bit keeps ours from removing theirs): that must not stop every
 * run of ours for good. Then the state lives in our runtime directory, /run/user/<uid>
 * (ours alone, never a workspace: a3s_stale_fallback_root); all our runs agree on it,
 * since the squatted name cannot turn into ours later. */
const char *a3s_stale_fallback_root(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/run/user/%lu", (unsigned long)geteuid());
    return dir;
}

static int state_open_fallback(bool create, a3s_error *err)
{
    const char *dir = a3s_stale_fallback_root();
    struct stat st;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH)))
        return -1;
    return state_open_at(dir, create, err);
}

int a3s_stale_state_open(const char *root, bool create, a3s_error *err)
{
    a3s_error first = {0};
    int fd = state_open_at(root, create, &first);
    if (fd != -1)
        return fd; /* the directory, or -2 (absent, !create) */
    a3s_error again = {0};
    int alt = state_open_fallback(create, &again);
    if (alt >= 0 || alt == -2)
        return alt;
    if (err)
        *err = first;
    return -1;
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

/* ---------------------------------------------------------------- run records */

struct a3s_run_rec {
    char name[sizeof OWNER_PREFIX + 32]; /* the record file in the state directory */
    int statefd, fd;
    off_t len; /* bytes written so far */
};

int a3s_stale_run_open(const char *root, a3s_run_rec **out, a3s_error *err)
{
    *out = NULL;
    a3s_run_rec *r = calloc(1, sizeof *r);
    if (!r)
        return a3s_fail(err, A3S_ERR_INTERNAL, "run record: out of memory");
    r->fd = -1;
    if ((r->statefd = a3s_stale_state_open(root, true, err)) < 0) {
        free(r);
        return -1;
    }
    for (int tries = 0; r->fd < 0; tries++) {
        char rnd[33];
        random_hex(rnd, 16);
        snprintf(r->name, sizeof r->name, OWNER_PREFIX "%s", rnd);
        r->fd = openat(r->statefd, r->name,
                       O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (r->fd < 0 && (errno != EEXIST || tries >= 8)) {
            int saved = errno;
            close(r->statefd);
            free(r);
            return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot create a run record");
        }
    }
    /* Locked before the first line goes in: a sweeper never mistakes a record of ours for
     * a dead one. Waiting only covers a sweeper probing this very file. */
    if (a3s_stale_lock(r->fd, F_WRLCK, 0, 0, true) < 0) {
        int saved = errno;
        (void)unlinkat(r->statefd, r->name, 0);
        close(r->fd);
        close(r->statefd);
        free(r);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot lock a run record");
    }
    *out = r;
    return 0;
}

static int run_append(a3s_run_rec *r, const char *line, size_t n, a3s_error *err)
{
    /* One write per line: a kill cannot leave half a line that parses. */
    ssize_t w = pwrite(r->fd, line, n, r->len);
    if (w != (ssize_t)n) {
        int saved = w < 0 ? errno : EIO;
        (void)ftruncate(r->fd, r->len);
        return a3s_fail_errno(err, A3S_ERR_SETUP, saved, "cannot write a run record");
    }
    r->len += (off_t)n;
    return 0;
}

int a3s_stale_run_note(a3s_run_rec *r, const char *kind, const char *path, a3s_error *err)
{
    char line[PATH_MAX + 32];
    if (!r)
        return 0;
    if (!path || path[0] != '/' || strchr(path, '\n'))
        return a3s_fail(err, A3S_ERR_INVALID, "run record: '%s' is not a recordable path",
                        path ? path : "(null)");
    int n = snprintf(line, sizeof line, "%s %s\n", kind, path);
    if (n < 0 || (size_t)n >= sizeof line)
        return a3s_fail(err, A3S_ERR_INVALID, "run record: path too long");
    return run_append(r, line, (size_t)n, err);
}

const char *a3s_stale_run_tag(const a3s_run_rec *r)
{
    return r ? r->name + strlen(OWNER_PREFIX) : NULL;
}

off_t a3s_stale_run_mark(const a3s_run_rec *r)
{
    return r ? r->len : 0;
}

void a3s_stale_run_undo(a3s_run_rec *r, off_t mark)
{
    /* One syscall: the lines after mark (noted for an object that was never made) go. */
    if (r && mark <= r->len && ftruncate(r->fd, mark) == 0)
        r->len = mark;
}

/* The real uid from /proc/<pid>/status (the /proc files of a non-dumpable process belong
 * to root, whoever runs it). (uid_t)-1: unknown. */
static uid_t proc_uid(pid_t pid)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return (uid_t)-1;
    ssize_t n = a3s_read_retry(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return (uid_t)-1;
    buf[n] = '\0';
    char *u = strstr(buf, "\nUid:");
    unsigned long v;
    return u && sscanf(u + 5, "%lu", &v) == 1 ? (uid_t)v : (uid_t)-1;
}

/* Field 22 of /proc/<pid>/stat: the start time in clock ticks since boot. 0: unknown. */
static unsigned long long proc_start(pid_t pid, uid_t *uid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = a3s_read_retry(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    if (uid)
        *uid = proc_uid(pid);
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    unsigned long long v = 0;
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p + 1, "%llu", &v) != 1)
        return 0;
    return v;
}

int a3s_stale_run_proc(a3s_run_rec *r, pid_t pid, a3s_error *err)
{
    if (!r || pid <= 0)
        return 0;
    unsigned long long start = proc_start(pid, NULL);
    if (!start)
        return 0; /* already gone: nothing to record */
    char line[96];
    int n = snprintf(line, sizeof line, "proc %d %llu\n", (int)pid, start);
    return run_append(r, line, (size_t)n, err);
}

void a3s_stale_run_close(a3s_run_rec *r, bool done)
{
    if (!r)
        return;
    /* Unlinked while still locked: nobody can take the name for a dead owner meanwhile.
     * Not done: the record stays, unlocked, for the next sweep. */
    if (done)
        unlink_if_same(r->statefd, r->name, r->fd);
    a3s_stale_lock_close(r->fd);
    close(r->statefd);
    free(r);
}

/* ---------------------------------------------------------------- scratch ownership */

struct owner {
    char *path; /* the scratch directory */
    a3s_run_rec *rec;
    struct owner *next;
};

static pthread_mutex_t owners_lock = PTHREAD_MUTEX_INITIALIZER;
static struct owner *owners; /* guarded by owners_lock */

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
    if (a3s_stale_run_open(root, &o->rec, err) < 0 ||
        a3s_stale_run_note(o->rec, "scratch", scratch, err) < 0) {
        a3s_stale_run_close(o->rec, true);
        free(o->path);
        free(o);
        return -1;
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
    a3s_stale_run_close(o->rec, true);
    free(o->path);
    free(o);
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

/* 32 lower-case hex digits: only tags made by a3s_stale_run_open are looked for. */
static bool tag_ok(const char *tag)
{
    size_t n = 0;
    for (; tag[n]; n++)
        if (!((tag[n] >= '0' && tag[n] <= '9') || (tag[n] >= 'a' && tag[n] <= 'f')))
            return false;
    return n == 32;
}

/* The process's command line (up to 8 KiB) into buf; its length, or 0. */
static size_t proc_cmdline(pid_t pid, char *buf, size_t cap)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = a3s_read_retry(fd, buf, cap);
    close(fd);
    return n > 0 ? (size_t)n : 0;
}

/* Does the command line carry "--tag TAG" (see a3s_stale_run_tag)? */
static bool cmdline_tagged(const char *buf, size_t n, const char *tag)
{
    char want[64];
    int wn = snprintf(want, sizeof want, "--tag%c%s%c", '\0', tag, '\0');
    return n > 0 && wn > 0 && (size_t)wn < sizeof want && memmem(buf, n, want, (size_t)wn) != NULL;
}

static bool proc_tagged(pid_t pid, const char *tag)
{
    char buf[8192];
    size_t n = proc_cmdline(pid, buf, sizeof buf);
    return cmdline_tagged(buf, n, tag);
}

/* Kill a process of a dead run: only the very process (same start time, read after its
 * pidfd was opened, so the pid cannot be reused in between), only one of ours, and only
 * one carrying the run's tag: a record is trusted to name the run's own sandbox, never
 * to reach any other process, even if it was forged. Killing the sandbox's first process
 * ends its whole pid namespace. Returns whether it was signalled. */
static bool kill_dead_proc(pid_t pid, unsigned long long start, const char *tag)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd < 0)
        return false; /* gone */
    uid_t uid = (uid_t)-1;
    bool hit = proc_start(pid, &uid) == start && (uid == geteuid() || geteuid() == 0) &&
               proc_tagged(pid, tag) &&
               syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0;
    if (hit) {
        /* Wait (bounded) until it is gone: a bwrap killed in the middle of clone() may
         * still create the sandbox's first process, which the tag scan must then see. */
        struct pollfd p = {pfd, POLLIN, 0};
        while (poll(&p, 1, 2000) < 0 && errno == EINTR)
            ;
    }
    close(pfd);
    return hit;
}

/* Kill the dead runs' sandbox processes found by their tags ("--tag TAG" on the argv,
 * see a3s_stale_run_tag): those they could not record. One pass over /proc for all the
 * tags (each command line read once: a sweep's cost does not grow with the number of
 * dead runs times processes). Only processes of ours (root: any, since a root caller's
 * sandbox runs under other ids), each checked again after its pidfd is open (same start
 * time), so a reused pid is never signalled. */
static int kill_tagged_once(const char *const *tags, size_t ntags)
{
    int killed = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    char buf[8192];
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 1 || pid == getpid())
            continue;
        size_t n = proc_cmdline((pid_t)pid, buf, sizeof buf);
        for (size_t i = 0; i < ntags && n; i++) {
            if (!cmdline_tagged(buf, n, tags[i]))
                continue;
            unsigned long long start = proc_start((pid_t)pid, NULL);
            if (start && kill_dead_proc((pid_t)pid, start, tags[i]))
                killed++;
            break;
        }
    }
    closedir(d);
    return killed;
}

/* Again after each kill: a bwrap killed in clone() may still have made its child. */
static void kill_tagged_all(const char *const *tags, size_t ntags)
{
    if (!ntags)
        return;
    for (int round = 0; round < 4 && kill_tagged_once(tags, ntags) > 0; round++) {
    }
}

static void kill_tagged(const char *tag)
{
    kill_tagged_all(&tag, 1);
}

/* Act on one complete line of a dead run's record; false: to be retried later. */
static bool sweep_line(char *line, const char *tag)
{
    if (line[0] == '/') /* the older format: the scratch path alone */
        return remove_dead_scratch(line);
    if (!strncmp(line, "scratch ", 8)) {
        /* The dead run's sandbox may still be going away (a bwrap in its last steps):
         * kill what carries the tag again and retry a few times, briefly. */
        for (int attempt = 0; attempt < 5; attempt++) {
            if (remove_dead_scratch(line + 8))
                return true;
            if (tag)
                kill_tagged(tag);
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        return false;
    }
    if (!strncmp(line, "cgroup ", 7))
        return line[7] != '/' || a3s_cgroup_sweep_dir(line + 7) == 0;
    int pid;
    unsigned long long start;
    if (tag && sscanf(line, "proc %d %llu", &pid, &start) == 2 && pid > 0)
        (void)kill_dead_proc(pid, start, tag);
    return true;
}

/* One record: leave it if its owner lives, else clean up after it: processes first (so
 * that nothing writes the scratch dir while it goes), then cgroups, then the scratch. */
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
    char buf[16384];
    size_t n = 0;
    for (ssize_t r; n < sizeof buf - 1 && (r = a3s_read_retry(fd, buf + n, sizeof buf - 1 - n)) > 0;)
        n += (size_t)r;
    buf[n] = '\0';
    if (n == 0) {
        /* Empty: a creator between open and lock, or one that died there. */
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        if (now.tv_sec - st.st_mtim.tv_sec < OWNER_GRACE_S) {
            a3s_stale_lock_close(fd);
            return;
        }
    }
    bool done = memchr(buf, '\0', n) == NULL;
    /* Legacy records have no tag: their processes are not ours to look for. */
    const char *tag = !strncmp(name, OWNER_PREFIX, strlen(OWNER_PREFIX))
                          ? name + strlen(OWNER_PREFIX) : NULL;
    if (tag && !tag_ok(tag))
        tag = NULL; /* not a name we make: never a tag to look for */
    /* Recorded processes first (each waited for), then those found by the run's tag
     * (made by a recorded one before it died, or never recorded), then the rest. A
     * trailing line without its newline was never completed: nothing of it was made. */
    for (int pass = 0; pass < 2 && done; pass++) {
        if (pass == 1 && tag)
            kill_tagged(tag);
        char *p = buf;
        for (char *nl; (nl = strchr(p, '\n')) != NULL; p = nl + 1) {
            *nl = '\0';
            bool is_proc = !strncmp(p, "proc ", 5);
            if (is_proc == (pass == 0) && !sweep_line(p, tag))
                done = false;
            *nl = '\n';
        }
    }
    if (done && !strncmp(name, OWNER_PREFIX, strlen(OWNER_PREFIX))) {
        /* Kept a while as a tomb: a bwrap killed mid-clone can still make the sandbox's
         * first process after this scan; the next sweeps look for the tag again. */
        char tomb[sizeof TOMB_PREFIX + 40];
        snprintf(tomb, sizeof tomb, TOMB_PREFIX "%s", name + strlen(OWNER_PREFIX));
        if (renameat(statefd, name, statefd, tomb) < 0)
            unlink_if_same(statefd, name, fd);
    } else if (done) {
        unlink_if_same(statefd, name, fd);
    }
    a3s_stale_lock_close(fd);
}

/* Tombs: the tags still looked for (at most TOMB_BATCH per sweep, the oldest forgotten
 * once past TOMB_KEEP_S). */
#define TOMB_BATCH 256
typedef struct tombs {
    char tag[TOMB_BATCH][33];
    size_t n;
} tombs;

static void sweep_tomb(int statefd, const char *name, tombs *t)
{
    struct stat st;
    struct timespec now;
    if (fstatat(statefd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
        st.st_uid != geteuid() || !tag_ok(name + strlen(TOMB_PREFIX)))
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec - st.st_ctim.tv_sec > TOMB_KEEP_S)
        (void)unlinkat(statefd, name, 0);
    else if (t->n < TOMB_BATCH)
        memcpy(t->tag[t->n++], name + strlen(TOMB_PREFIX), 33);
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

static void sweep_tomb_cb(int statefd, const char *name, void *ud)
{
    sweep_tomb(statefd, name, ud);
}

void a3s_stale_sweep(const char *root)
{
    a3s_stale_foreach(root, OWNER_PREFIX, sweep_owner_cb, NULL);
    a3s_stale_foreach(root, LEGACY_PREFIX, sweep_owner_cb, NULL);
    tombs *t = calloc(1, sizeof *t);
    if (!t)
        return; /* the next sweep looks again */
    a3s_stale_foreach(root, TOMB_PREFIX, sweep_tomb_cb, t);
    const char *tags[TOMB_BATCH];
    for (size_t i = 0; i < t->n; i++)
        tags[i] = t->tag[i];
    kill_tagged_all(tags, t->n);
    free(t);
}

