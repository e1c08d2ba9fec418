/* Resource quotas with cgroups (see cgroup.h): the per-execution cgroups (create,
 * limits, join, events, destroy, sweep) and the safe access to cgroup filesystems that
 * they and the probe (cgroup_probe.c) share.
 *
 * Paths. Every path is the cgroup root (default /sys/fs/cgroup) joined with the caller's
 * own cgroup as /proc/self/cgroup names it. A root or cgroup path that is not clean
 * (empty, "." or ".." components), or that holds a backslash (an escaped character) or
 * a control character, is refused, and directories are opened one component at a time
 * with O_NOFOLLOW, so no symbolic link anywhere on the way can redirect a mkdir or a
 * limit write. The only link accepted is a v1 hierarchy name that points at a sibling in
 * the root ("cpu" -> "cpu,cpuacct", as systemd sets up). A place is used only when statfs
 * says it is a cgroup filesystem of the expected version, so a look-alike tree of
 * ordinary directories is never written to.
 *
 * cgroup v1. Each controller lives in its own hierarchy, so an execution gets one
 * directory per hierarchy, each below the caller's cgroup there, and the child joins
 * them all. Differences from v2 that callers see: the OOM kill count comes from the
 * "oom_kill" line of memory.oom_control (Linux >= 4.13); on older kernels it is unknown
 * and stays 0 (memory.failcnt counts limit hits, which reclaim usually absorbs, not
 * kills, so it is not reported as one): the killed process is still visible by its
 * SIGKILL. Swap: memory.memsw.limit_in_bytes is set to the memory limit when the kernel
 * accounts swap; without swap accounting the tree may swap beyond the limit. */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "cgroup_internal.h"
#include "util.h"

#define CG_CPU_PERIOD_US 100000
#define CG_CPU_MIN_MILLICORES 10 /* the kernel's minimum quota: 1 ms per 100 ms period */
#define CG_DESTROY_WAIT_MS 200
#define CG_ID_MAX 200

/* One per-execution cgroup directory: a v2 cgroup or one v1 hierarchy's. */
typedef struct cg_dir {
    bool v2;
    bool made;       /* we created it: destroy removes it */
    unsigned quotas; /* bit per enum a3s_quota */
    int parent;      /* the directory it was made in (rmdir is relative to it) */
    int fd;          /* the cgroup directory (limits, events, members) */
    int procs;       /* its cgroup.procs, O_WRONLY, for the child to join */
    char path[4096]; /* for messages */
} cg_dir;

struct a3s_cgroup {
    char name[sizeof CG_PREFIX + CG_ID_MAX];
    size_t n;
    cg_dir d[A3S_QUOTA_COUNT];
};

const quota_info a3s_cg_quotas[A3S_QUOTA_COUNT] = {
    [A3S_QUOTA_PIDS] = {"pids", "pids", "pids.max", "pids.max"},
    [A3S_QUOTA_MEMORY] = {"memory", "memory", "memory.limit_in_bytes", "memory.max"},
    [A3S_QUOTA_CPU] = {"cpu", "cpu", "cpu.cfs_quota_us", "cpu.max"},
};

/* ---------------------------------------------------------------- cgroup files */

/* snprintf for messages that may be cut short on purpose (why_not has 256 bytes). */
void a3s_cg_msgf(char *buf, size_t sz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, sz, fmt, ap);
    va_end(ap);
}

/* Clean, absolute, and without escapes or control characters. */
bool a3s_cg_path_safe(const char *p)
{
    if (!a3s_path_is_clean(p))
        return false;
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c == '\\' || *c < 0x20 || *c == 0x7f)
            return false;
    return true;
}

/* Open the directory at clean path `rel` below dfd ("/" is dfd itself, duplicated), one
 * component at a time without following any link. -1 with errno. */
int a3s_cg_open_below(int dfd, const char *rel)
{
    int fd = fcntl(dfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    const char *c = rel + 1;
    while (*c) {
        const char *e = strchrnul(c, '/');
        size_t n = (size_t)(e - c);
        char comp[NAME_MAX + 1];
        if (n > NAME_MAX) {
            close(fd);
            errno = ENAMETOOLONG;
            return -1;
        }
        memcpy(comp, c, n);
        comp[n] = '\0';
        int nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int saved = errno;
        close(fd);
        if (nfd < 0) {
            errno = saved;
            return -1;
        }
        fd = nfd;
        c = *e ? e + 1 : e;
    }
    return fd;
}

/* Open a safe absolute directory path without following links. -1 with errno. */
int a3s_cg_open_dir_nofollow(const char *path)
{
    if (!a3s_cg_path_safe(path)) {
        errno = EINVAL;
        return -1;
    }
    int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return -1;
    int fd = a3s_cg_open_below(root, path);
    int saved = errno;
    close(root);
    errno = saved;
    return fd;
}

bool a3s_cg_fs_is(int fd, unsigned long magic)
{
    struct statfs st;
    return fstatfs(fd, &st) == 0 && (unsigned long)st.f_type == magic;
}

/* Read a small file below dfd into buf, NUL-terminated: its length, or -1 with errno. */
ssize_t a3s_cg_read_small_at(int dfd, const char *name, char *buf, size_t sz)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    size_t len = 0;
    for (;;) {
        if (len + 1 >= sz) {
            close(fd);
            errno = EFBIG;
            return -1;
        }
        ssize_t r = a3s_read_retry(fd, buf + len, sz - 1 - len);
        if (r < 0) {
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    return (ssize_t)len;
}

/* Write s to the control file `name` below dfd in one write (cgroup files take one value
 * per write). 0, or -1 with errno. */
int a3s_cg_write_at(int dfd, const char *name, const char *s)
{
    int fd = openat(dfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    int rc = a3s_write_all(fd, s, strlen(s));
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* The value of the line "key N" in an events-style file. */
static bool key_u64(const char *text, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    for (const char *line = text; line && *line;) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(line + kl + 1, &end, 10);
            if (errno || end == line + kl + 1)
                return false;
            *out = (uint64_t)v;
            return true;
        }
        line = strchr(line, '\n');
        if (line)
            line++;
    }
    return false;
}

/* ---------------------------------------------------------------- create */

static bool id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    if (n == 0 || n > CG_ID_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = id[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return false;
    }
    return true;
}

static int write_limit(cg_dir *d, const char *file, const char *val, bool optional, a3s_error *err)
{
    if (a3s_cg_write_at(d->fd, file, val) == 0 || (optional && errno == ENOENT))
        return 0;
    return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot write %s '%s' in cgroup %s", file, val,
                          d->path);
}

static int write_limits(cg_dir *d, const a3s_cgroup_limits *lim, a3s_error *err)
{
    char v[64];
    if (d->quotas & (1u << A3S_QUOTA_PIDS)) {
        snprintf(v, sizeof v, "%lld", (long long)lim->pids);
        if (write_limit(d, "pids.max", v, false, err) < 0)
            return -1;
    }
    if (d->quotas & (1u << A3S_QUOTA_MEMORY)) {
        snprintf(v, sizeof v, "%lld", (long long)lim->memory_bytes);
        if (d->v2) {
            /* no swap at all: the limit is on memory, not on memory plus swap */
            if (write_limit(d, "memory.max", v, false, err) < 0 ||
                write_limit(d, "memory.swap.max", "0", true, err) < 0)
                return -1;
        } else {
            /* memsw (memory + swap) must not be below the memory limit, so it comes
             * second; same value: no swap beyond the limit. Without swap accounting the
             * file is absent. oom_kill_disable is inherited from the parent: clear it so
             * the tree is killed at the limit instead of hanging in it. */
            if (write_limit(d, "memory.limit_in_bytes", v, false, err) < 0 ||
                write_limit(d, "memory.memsw.limit_in_bytes", v, true, err) < 0 ||
                write_limit(d, "memory.oom_control", "0", true, err) < 0)
                return -1;
        }
    }
    if (d->quotas & (1u << A3S_QUOTA_CPU)) {
        long long quota = (long long)lim->cpu_millicores * (CG_CPU_PERIOD_US / 1000);
        if (d->v2) {
            snprintf(v, sizeof v, "%lld %d", quota, CG_CPU_PERIOD_US);
            if (write_limit(d, "cpu.max", v, false, err) < 0)
                return -1;
        } else {
            char p[32];
            snprintf(p, sizeof p, "%d", CG_CPU_PERIOD_US);
            snprintf(v, sizeof v, "%lld", quota);
            if (write_limit(d, "cpu.cfs_period_us", p, false, err) < 0 ||
                write_limit(d, "cpu.cfs_quota_us", v, false, err) < 0)
                return -1;
        }
    }
    return 0;
}

/* Make d's directory named `name` in parent directory pdir and write its limits. */
static int make_dir(cg_dir *d, const char *pdir, const char *name, const a3s_cgroup_limits *lim,
                    a3s_cgroup_note_fn note, void *note_ud, a3s_error *err)
{
    d->parent = a3s_cg_open_dir_nofollow(pdir);
    if (d->parent < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open cgroup %s", pdir);
    if (!a3s_cg_fs_is(d->parent, d->v2 ? CGROUP2_SUPER_MAGIC : CGROUP_SUPER_MAGIC))
        return a3s_fail(err, A3S_ERR_SETUP, "%s is not a cgroup %s filesystem", pdir,
                        d->v2 ? "v2" : "v1");
    int n = snprintf(d->path, sizeof d->path, "%s/%s", pdir, name);
    if (n < 0 || (size_t)n >= sizeof d->path)
        return a3s_fail(err, A3S_ERR_SETUP, "cgroup path below %s too long", pdir);
    /* Recorded before it exists: a caller killed right after the mkdir is swept. */
    if (note && note(note_ud, d->path, err) < 0)
        return -1;
    if (mkdirat(d->parent, name, 0755) != 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot create cgroup %s", d->path);
    d->made = true;
    d->fd = openat(d->parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->fd < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open cgroup %s", d->path);
    if (write_limits(d, lim, err) < 0)
        return -1;
    d->procs = openat(d->fd, "cgroup.procs", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (d->procs < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open cgroup.procs of %s", d->path);
    return 0;
}

/* Prefix err's message with the quotas of d, so every create error names its quota. */
static void name_quotas(const cg_dir *d, a3s_error *err)
{
    if (!err)
        return;
    char names[64] = "";
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        if (d->quotas & (1u << q))
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     names[0] ? "+" : "", a3s_cg_quotas[q].name);
    char msg[sizeof err->msg];
    memcpy(msg, err->msg, sizeof msg);
    a3s_cg_msgf(err->msg, sizeof err->msg, "cannot set up the %s quota: %s", names, msg);
}

int a3s_cgroup_create(const a3s_cgroup_caps *caps, const a3s_cgroup_limits *lim, const char *id,
                      a3s_cgroup **out, a3s_error *err)
{
    return a3s_cgroup_create_noted(caps, lim, id, NULL, NULL, out, err);
}

int a3s_cgroup_create_noted(const a3s_cgroup_caps *caps, const a3s_cgroup_limits *lim,
                            const char *id, a3s_cgroup_note_fn note, void *note_ud,
                            a3s_cgroup **out, a3s_error *err)
{
    if (!out)
        return a3s_fail(err, A3S_ERR_INVALID, "cgroup: no result pointer");
    *out = NULL;
    if (!caps || !lim)
        return a3s_fail(err, A3S_ERR_INVALID, "cgroup: no capabilities or limits");
    const int64_t want[A3S_QUOTA_COUNT] = {lim->pids, lim->memory_bytes, lim->cpu_millicores};
    unsigned mask = 0;
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        if (want[q] < 0)
            return a3s_fail(err, A3S_ERR_INVALID, "%s quota %lld is negative",
                            a3s_cg_quotas[q].name, (long long)want[q]);
        if (want[q] > 0)
            mask |= 1u << q;
    }
    if (!mask)
        return 0;
    int64_t cpu = lim->cpu_millicores;
    if (cpu > 0 && cpu < CG_CPU_MIN_MILLICORES)
        return a3s_fail(err, A3S_ERR_INVALID,
                        "cpu quota of %lld millicores is below the enforceable minimum of %d "
                        "(1 ms per 100 ms)",
                        (long long)cpu, CG_CPU_MIN_MILLICORES);
    if (cpu > INT64_MAX / (CG_CPU_PERIOD_US / 1000))
        return a3s_fail(err, A3S_ERR_INVALID, "cpu quota of %lld millicores is too large",
                        (long long)cpu);
    if (!id_ok(id))
        return a3s_fail(err, A3S_ERR_INVALID, "cgroup: invalid execution id");
    /* Check every requested quota before creating anything. */
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        if ((mask & (1u << q)) && !caps->can[q])
            return a3s_fail(err, A3S_ERR_SETUP, "cannot enforce the %s quota: %s",
                            a3s_cg_quotas[q].name,
                            caps->why_not[q][0] ? caps->why_not[q] : "no cgroup was probed");

    a3s_cgroup *cg = calloc(1, sizeof *cg);
    if (!cg)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    snprintf(cg->name, sizeof cg->name, CG_PREFIX "%s", id);
    /* One directory per distinct parent: a v2 cgroup holds all v2 quotas, each v1
     * hierarchy its own (co-mounted controllers share one). */
    const char *pdir[A3S_QUOTA_COUNT] = {NULL};
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        if (!(mask & (1u << q)))
            continue;
        bool v2 = strcmp(caps->via[q], "cgroup v2") == 0;
        size_t i;
        for (i = 0; i < cg->n; i++) {
            if (cg->d[i].v2 != v2)
                continue;
            if (strcmp(pdir[i], caps->dir[q]) == 0)
                break;
            if (v2) {
                free(cg);
                return a3s_fail(err, A3S_ERR_SETUP,
                                "cannot enforce the %s quota: its cgroup v2 parent differs "
                                "from the other quotas'",
                                a3s_cg_quotas[q].name);
            }
        }
        if (i == cg->n) {
            cg->d[i] = (cg_dir){.v2 = v2, .parent = -1, .fd = -1, .procs = -1};
            pdir[i] = caps->dir[q];
            cg->n++;
        }
        cg->d[i].quotas |= 1u << q;
    }
    for (size_t i = 0; i < cg->n; i++) {
        if (make_dir(&cg->d[i], pdir[i], cg->name, lim, note, note_ud, err) < 0) {
            name_quotas(&cg->d[i], err);
            (void)a3s_cgroup_destroy(cg); /* removes what was made */
            return -1;
        }
    }
    *out = cg;
    return 0;
}

size_t a3s_cgroup_join_fds(const a3s_cgroup *cg, int *fds, size_t max)
{
    size_t n = 0;
    if (!cg || !fds)
        return 0;
    for (size_t i = 0; i < cg->n && n < max; i++)
        if (cg->d[i].procs >= 0)
            fds[n++] = cg->d[i].procs;
    return n;
}

/* ---------------------------------------------------------------- events */

void a3s_cgroup_events_read(const a3s_cgroup *cg, a3s_cgroup_events *ev)
{
    if (!ev)
        return;
    memset(ev, 0, sizeof *ev);
    if (!cg)
        return;
    char buf[4096];
    uint64_t v;
    for (size_t i = 0; i < cg->n; i++) {
        const cg_dir *d = &cg->d[i];
        if (d->fd < 0)
            continue;
        /* v1: no "oom_kill" line before Linux 4.13: unknown, left at 0 */
        if ((d->quotas & (1u << A3S_QUOTA_MEMORY)) &&
            a3s_cg_read_small_at(d->fd, d->v2 ? "memory.events" : "memory.oom_control", buf,
                                 sizeof buf) >= 0 &&
            key_u64(buf, "oom_kill", &v))
            ev->oom_kills += v;
        if ((d->quotas & (1u << A3S_QUOTA_PIDS)) &&
            a3s_cg_read_small_at(d->fd, "pids.events", buf, sizeof buf) >= 0 &&
            key_u64(buf, "max", &v))
            ev->pids_max += v;
    }
}

/* ---------------------------------------------------------------- destroy */

/* The pids listed in cgroup.procs of cgfd (malloc'ed, *n of them), or NULL with *n = 0
 * when it is empty or unreadable. */
static pid_t *read_procs(int cgfd, size_t *n)
{
    *n = 0;
    int fd = openat(cgfd, "cgroup.procs", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = a3s_read_retry(fd, buf + len, cap - 1 - len);
        if (r < 0) {
            free(buf);
            buf = NULL;
        } else if (r == 0) {
            buf[len] = '\0';
            break;
        } else {
            len += (size_t)r;
        }
    }
    close(fd);
    if (!buf)
        return NULL;
    size_t lines = 1; /* the last line may lack its newline */
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    pid_t *pids = len ? malloc(lines * sizeof *pids) : NULL;
    if (pids) {
        for (char *p = buf; *p;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            if (v > 0 && v <= INT_MAX && *n < lines)
                pids[(*n)++] = (pid_t)v;
            p = end + strspn(end, "\n");
        }
    }
    free(buf);
    if (pids && *n == 0) {
        free(pids);
        pids = NULL;
    }
    return pids;
}

/* SIGKILL every member of cgfd; returns how many there were. A pid read from
 * cgroup.procs may be reused once that process is gone, so each is pinned with a pidfd
 * and signalled only if it is still listed after the pidfd was taken. */
static size_t kill_members(int cgfd)
{
    size_t n, m;
    pid_t *pids = read_procs(cgfd, &n);
    if (!pids)
        return 0;
    int *pfd = malloc(n * sizeof *pfd);
    if (!pfd) {
        free(pids);
        return n; /* try again on the next round */
    }
    for (size_t i = 0; i < n; i++) {
        pfd[i] = pidfd_open(pids[i], 0);
        if (pfd[i] < 0 && errno == ENOSYS)
            (void)kill(pids[i], SIGKILL); /* before Linux 5.3: nothing better exists */
    }
    pid_t *now = read_procs(cgfd, &m);
    for (size_t i = 0; i < n; i++) {
        if (pfd[i] < 0)
            continue;
        bool listed = false;
        for (size_t j = 0; j < m && !listed; j++)
            listed = now[j] == pids[i];
        if (listed)
            (void)pidfd_send_signal(pfd[i], SIGKILL, NULL, 0);
        close(pfd[i]);
    }
    free(now);
    free(pfd);
    free(pids);
    return n;
}

/* Kill the members, then rmdir once the cgroup is empty, within a bounded time. */
static int remove_dir(cg_dir *d, const char *name)
{
    /* v2 (Linux >= 5.14): one write kills the whole cgroup, no pid races at all */
    if (d->v2 && d->fd >= 0)
        (void)a3s_cg_write_at(d->fd, "cgroup.kill", "1");
    unsigned long long deadline = a3s_now_ms() + CG_DESTROY_WAIT_MS;
    for (;;) {
        size_t members = d->fd >= 0 ? kill_members(d->fd) : 0;
        if (members == 0) {
            if (unlinkat(d->parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
                return 0;
            if (errno != EBUSY)
                return -1;
        }
        if (a3s_now_ms() >= deadline)
            return -1;
        /* Killed processes leave the cgroup as they exit. v1 gives no notification of
         * that (v2's cgroup.events does, but one short poll serves both), so poll. */
        struct timespec ts = {0, 5 * 1000 * 1000};
        (void)nanosleep(&ts, NULL);
    }
}

int a3s_cgroup_destroy(a3s_cgroup *cg)
{
    if (!cg)
        return 0;
    int rc = 0;
    for (size_t i = cg->n; i-- > 0;) {
        cg_dir *d = &cg->d[i];
        if (d->procs >= 0)
            close(d->procs);
        if (d->made && remove_dir(d, cg->name) != 0)
            rc = -1;
        if (d->fd >= 0)
            close(d->fd);
        if (d->parent >= 0)
            close(d->parent);
    }
    free(cg);
    return rc;
}

int a3s_cgroup_sweep_dir(const char *path)
{
    const char *base = strrchr(path, '/');
    if (path[0] != '/' || !base || strncmp(base + 1, CG_PREFIX, strlen(CG_PREFIX)) != 0 ||
        strncmp(base + 1, CG_PREFIX "probe-", strlen(CG_PREFIX "probe-")) == 0)
        return 0; /* not a run's cgroup: never ours to remove */
    char parent[PATH_MAX];
    size_t plen = (size_t)(base - path);
    if (plen == 0 || plen >= sizeof parent)
        return 0;
    memcpy(parent, path, plen);
    parent[plen] = '\0';
    cg_dir d = {.parent = a3s_cg_open_dir_nofollow(parent), .fd = -1, .procs = -1};
    if (d.parent < 0)
        return 0; /* the hierarchy is gone: so is the cgroup */
    d.v2 = a3s_cg_fs_is(d.parent, CGROUP2_SUPER_MAGIC);
    if (!d.v2 && !a3s_cg_fs_is(d.parent, CGROUP_SUPER_MAGIC)) {
        close(d.parent);
        return 0;
    }
    d.fd = openat(d.parent, base + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d.fd < 0) {
        int gone = errno == ENOENT;
        close(d.parent);
        return gone ? 0 : -1;
    }
    int rc = remove_dir(&d, base + 1);
    close(d.fd);
    close(d.parent);
    return rc;
}
