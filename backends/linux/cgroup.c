/* Resource quotas with cgroups (see cgroup.h).
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
 * cgroup v2 and the "no internal processes" rule. Children of the caller's cgroup P get
 * a controller only if P's cgroup.subtree_control enables it, and the kernel refuses to
 * enable a domain controller (memory) there with EBUSY while P has processes of its own
 * (the caller is one), unless P is the root cgroup; threaded controllers (pids, cpu) may
 * be enabled anyway. So the probe tries P first and then a dedicated child
 * P/a3s-sandbox; that child only gets controllers P already enables for its children,
 * so it helps where P delegates but is not writable to us, and not where P itself is
 * populated. We never move the caller's own process to make room (nsjail does): a
 * library must not change its host's cgroup. Such hosts fall back to the v1 hierarchies
 * or refuse the quota.
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define CG_DEFAULT_ROOT "/sys/fs/cgroup"
#define CG_PREFIX "a3s-sandbox-"
#define CG_V2_DEDICATED "a3s-sandbox"
#define CG_CPU_PERIOD_US 100000
#define CG_CPU_MIN_MILLICORES 10 /* the kernel's minimum quota: 1 ms per 100 ms period */
#define CG_DESTROY_WAIT_MS 200
#define CG_ID_MAX 200
#define CG_ALL ((1u << A3S_QUOTA_COUNT) - 1)

typedef struct quota_info {
    const char *name;    /* in messages */
    const char *ctrl;    /* controller */
    const char *v1_file; /* proves the v1 controller is attached to a new cgroup */
    const char *v2_file; /* same for v2 */
} quota_info;

static const quota_info quotas[A3S_QUOTA_COUNT] = {
    [A3S_QUOTA_PIDS] = {"pids", "pids", "pids.max", "pids.max"},
    [A3S_QUOTA_MEMORY] = {"memory", "memory", "memory.limit_in_bytes", "memory.max"},
    [A3S_QUOTA_CPU] = {"cpu", "cpu", "cpu.cfs_quota_us", "cpu.max"},
};

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

/* ---------------------------------------------------------------- small helpers */

/* Short errno names keep why_not (256 bytes) readable: "not writable (EACCES)". */
static const char *errname(int e)
{
    const char *n = a3s_errno_symbol(e);
    return n ? n : strerror(e);
}

/* snprintf for messages that may be cut short on purpose (why_not has 256 bytes). */
static void msgf(char *buf, size_t sz, const char *fmt, ...) A3S_PRINTF(3, 4);
static void msgf(char *buf, size_t sz, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(buf, sz, fmt, ap);
    va_end(ap);
}

/* Clean, absolute, and without escapes or control characters. */
static bool cg_path_safe(const char *p)
{
    if (!a3s_path_is_clean(p))
        return false;
    for (const unsigned char *c = (const unsigned char *)p; *c; c++)
        if (*c == '\\' || *c < 0x20 || *c == 0x7f)
            return false;
    return true;
}

/* a joined with the clean absolute path b ("/" adds nothing); false when too long. */
static bool path_cat(char *out, size_t sz, const char *a, const char *b)
{
    if (strcmp(a, "/") == 0)
        a = "";
    if (strcmp(b, "/") == 0)
        b = "";
    int n = snprintf(out, sz, "%s%s", a, b);
    if (n < 0 || (size_t)n >= sz)
        return false;
    if (out[0] == '\0')
        snprintf(out, sz, "/");
    return true;
}

/* Open the directory at clean path `rel` below dfd ("/" is dfd itself, duplicated), one
 * component at a time without following any link. -1 with errno. */
static int open_below(int dfd, const char *rel)
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
static int open_dir_nofollow(const char *path)
{
    if (!cg_path_safe(path)) {
        errno = EINVAL;
        return -1;
    }
    int root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return -1;
    int fd = open_below(root, path);
    int saved = errno;
    close(root);
    errno = saved;
    return fd;
}

static bool fs_is(int fd, unsigned long magic)
{
    struct statfs st;
    return fstatfs(fd, &st) == 0 && (unsigned long)st.f_type == magic;
}

/* Read a small file below dfd into buf, NUL-terminated: its length, or -1 with errno. */
static ssize_t read_small_at(int dfd, const char *name, char *buf, size_t sz)
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
static int write_at(int dfd, const char *name, const char *s)
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

/* Whether `word` is one of the items of `list` separated by any of `seps`. */
static bool list_has(const char *list, const char *word, const char *seps)
{
    size_t wl = strlen(word);
    const char *p = list;
    while (*p) {
        p += strspn(p, seps);
        size_t n = strcspn(p, seps);
        if (n == wl && strncmp(p, word, wl) == 0)
            return true;
        p += n;
    }
    return false;
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

/* The caller's cgroup in the v1 hierarchy holding `ctrl`, or in v2 when ctrl is NULL
 * (the "0::" line). 0, or -1 with errno: ENOENT no such line, EINVAL an unsafe path
 * (escaped, or "/.." when the cgroup is outside our cgroup namespace). */
static int self_cgroup(const char *ctrl, char *out, size_t sz)
{
    char buf[16384];
    if (read_small_at(AT_FDCWD, "/proc/self/cgroup", buf, sizeof buf) < 0)
        return -1;
    for (char *line = buf, *next; *line; line = next) {
        char *nl = strchr(line, '\n');
        next = nl ? nl + 1 : line + strlen(line);
        if (nl)
            *nl = '\0';
        /* "hierarchy-id:controller-list:path"; the path may itself hold ':' */
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = '\0';
        const char *hid = line, *ctrls = c1 + 1, *path = c2 + 1;
        bool match = ctrl ? strcmp(hid, "0") != 0 && list_has(ctrls, ctrl, ",")
                          : strcmp(hid, "0") == 0 && ctrls[0] == '\0';
        if (!match)
            continue;
        if (!cg_path_safe(path)) {
            errno = EINVAL;
            return -1;
        }
        if (strlen(path) >= sz) {
            errno = ENAMETOOLONG;
            return -1;
        }
        strcpy(out, path);
        return 0;
    }
    errno = ENOENT;
    return -1;
}

static atomic_uint probe_seq;

/* Create and remove the child cgroup "a3s-sandbox-probe-<pid>-<n>" in dfd, checking that
 * the new cgroup has `file` (the controller is really attached). The counter keeps
 * concurrent probes of one process apart. 0; -1 with errno (mkdir/rmdir); -2: no file. */
static int probe_child(int dfd, const char *file)
{
    char name[64];
    snprintf(name, sizeof name, CG_PREFIX "probe-%ld-%u", (long)getpid(),
             atomic_fetch_add(&probe_seq, 1u));
    if (mkdirat(dfd, name, 0755) != 0)
        return -1;
    int rc = 0, saved = 0;
    int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0) {
        rc = -1;
        saved = errno;
    } else {
        struct stat st;
        if (fstatat(cfd, file, &st, AT_SYMLINK_NOFOLLOW) != 0)
            rc = -2;
        close(cfd);
    }
    if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && rc == 0) {
        rc = -1;
        saved = errno;
    }
    errno = saved;
    return rc;
}

/* ---------------------------------------------------------------- probe: v1 */

/* Whether per-execution cgroups for quota q can be made in the v1 hierarchy of its
 * controller, below the caller's cgroup there: dir gets that directory, else why. */
static bool probe_v1(const char *root, enum a3s_quota q, char *dir, size_t dsz, char *why,
                     size_t wsz)
{
    const char *c = quotas[q].ctrl;
    char self[4096], name[NAME_MAX + 1];
    if (self_cgroup(c, self, sizeof self) != 0) {
        if (errno == ENOENT)
            msgf(why, wsz, "v1 %s hierarchy not in use (not in /proc/self/cgroup)", c);
        else
            msgf(why, wsz, "v1 %s: unusable own cgroup path (%s)", c, errname(errno));
        return false;
    }
    int rfd = open_dir_nofollow(root);
    if (rfd < 0) {
        msgf(why, wsz, "v1 %s: cgroup root unusable (%s)", c, errname(errno));
        return false;
    }
    /* systemd links "cpu" to the co-mounted "cpu,cpuacct": follow only such a link to a
     * plain sibling name, never out of the root. */
    ssize_t n = readlinkat(rfd, c, name, sizeof name - 1);
    if (n >= 0) {
        name[n] = '\0';
        if ((size_t)n >= sizeof name - 1 || n == 0 || strchr(name, '/') || strchr(name, '\\') ||
            strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
            close(rfd);
            msgf(why, wsz, "v1 %s: hierarchy link leads outside the cgroup root", c);
            return false;
        }
    } else if (errno == EINVAL) {
        snprintf(name, sizeof name, "%s", c); /* not a link */
    } else {
        int e = errno;
        close(rfd);
        msgf(why, wsz, "v1 %s hierarchy not mounted (%s)", c, errname(e));
        return false;
    }
    int hfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(rfd);
    if (hfd < 0) {
        msgf(why, wsz, "v1 %s hierarchy not mounted (%s)", c, errname(e));
        return false;
    }
    if (!fs_is(hfd, CGROUP_SUPER_MAGIC)) {
        close(hfd);
        msgf(why, wsz, "v1 %s: %s/%s is not a cgroup v1 hierarchy", c, root, name);
        return false;
    }
    int dfd = open_below(hfd, self);
    e = errno;
    close(hfd);
    if (dfd < 0) {
        msgf(why, wsz, "v1 %s: own cgroup %s not found (%s)", c, self, errname(e));
        return false;
    }
    char hier[4096];
    int hn = snprintf(hier, sizeof hier, "%s/%s", strcmp(root, "/") == 0 ? "" : root, name);
    if (hn < 0 || (size_t)hn >= sizeof hier || !path_cat(dir, dsz, hier, self)) {
        close(dfd);
        msgf(why, wsz, "v1 %s: cgroup path too long", c);
        return false;
    }
    int rc = probe_child(dfd, quotas[q].v1_file);
    e = errno;
    close(dfd);
    if (rc == -1) {
        msgf(why, wsz, "v1 %s hierarchy not writable (%s)", c, errname(e));
        return false;
    }
    if (rc == -2) {
        msgf(why, wsz, "v1 %s: a new cgroup has no %s", c, quotas[q].v1_file);
        return false;
    }
    return true;
}

/* ---------------------------------------------------------------- probe: v2 */

/* Whether children of the v2 cgroup dfd can have quota q's controller: it is offered to
 * dfd (cgroup.controllers), enabled for its children (cgroup.subtree_control; enabled
 * here when it is not yet), and a probe child gets the control file. */
static bool v2_parent_ok(int dfd, enum a3s_quota q, char *why, size_t wsz)
{
    const char *c = quotas[q].ctrl;
    char buf[1024];
    if (read_small_at(dfd, "cgroup.controllers", buf, sizeof buf) < 0) {
        msgf(why, wsz, "v2: cgroup.controllers unreadable (%s)", errname(errno));
        return false;
    }
    if (!list_has(buf, c, " \t\n")) {
        msgf(why, wsz, "v2 has no delegated %s controller", c);
        return false;
    }
    if (read_small_at(dfd, "cgroup.subtree_control", buf, sizeof buf) < 0) {
        msgf(why, wsz, "v2: cgroup.subtree_control unreadable (%s)", errname(errno));
        return false;
    }
    if (!list_has(buf, c, " \t\n")) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "+%s", c);
        if (write_at(dfd, "cgroup.subtree_control", cmd) != 0) {
            if (errno == EBUSY)
                msgf(why, wsz,
                     "v2 %s controller cannot be enabled for child cgroups (EBUSY: the "
                     "caller's cgroup has processes of its own)",
                     c);
            else
                msgf(why, wsz, "v2 %s controller cannot be enabled for child cgroups (%s)", c,
                     errname(errno));
            return false;
        }
    }
    int rc = probe_child(dfd, quotas[q].v2_file);
    if (rc == -1) {
        msgf(why, wsz, "v2 cgroup not writable (%s)", errname(errno));
        return false;
    }
    if (rc == -2) {
        msgf(why, wsz, "v2: a new cgroup has no %s", quotas[q].v2_file);
        return false;
    }
    return true;
}

static int popcount(unsigned m)
{
    int n = 0;
    for (; m; m &= m - 1)
        n++;
    return n;
}

/* Find where v2 per-execution cgroups can go: the caller's own cgroup, else its child
 * "a3s-sandbox". All v2 quotas must share one parent (a process is in exactly one v2
 * cgroup), so the candidate serving more quotas wins. Returns the mask of usable quotas
 * with dir set, why[q] for the others. */
static unsigned probe_v2(const char *root, char *dir, size_t dsz, char why[A3S_QUOTA_COUNT][256])
{
    char base[4096], self[4096], pdir[4096];
    const char *fail = NULL;
    char fbuf[256];
    int rfd = open_dir_nofollow(root);
    if (rfd < 0) {
        msgf(fbuf, sizeof fbuf, "v2: cgroup root unusable (%s)", errname(errno));
        fail = fbuf;
    } else {
        /* a pure v2 host mounts cgroup2 at the root, a hybrid one at <root>/unified */
        if (fs_is(rfd, CGROUP2_SUPER_MAGIC)) {
            snprintf(base, sizeof base, "%s", root);
        } else {
            int ufd = openat(rfd, "unified", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            bool v2 = ufd >= 0 && fs_is(ufd, CGROUP2_SUPER_MAGIC);
            if (ufd >= 0)
                close(ufd);
            if (!v2 || !path_cat(base, sizeof base, root, "/unified"))
                fail = "no cgroup v2 mount";
        }
        close(rfd);
    }
    if (!fail && self_cgroup(NULL, self, sizeof self) != 0) {
        msgf(fbuf, sizeof fbuf, "v2: no usable 0:: line in /proc/self/cgroup (%s)", errname(errno));
        fail = fbuf;
    }
    if (!fail && !path_cat(pdir, sizeof pdir, base, self))
        fail = "v2: cgroup path too long";
    int pfd = -1;
    if (!fail) {
        pfd = open_dir_nofollow(pdir);
        if (pfd < 0) {
            msgf(fbuf, sizeof fbuf, "v2: own cgroup %s not accessible (%s)", self, errname(errno));
            fail = fbuf;
        } else if (!fs_is(pfd, CGROUP2_SUPER_MAGIC)) {
            fail = "v2: own cgroup is not on a cgroup2 filesystem";
        }
    }
    if (fail) {
        if (pfd >= 0)
            close(pfd);
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            msgf(why[q], sizeof why[q], "%s", fail);
        return 0;
    }

    unsigned mask = 0;
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        if (v2_parent_ok(pfd, (enum a3s_quota)q, why[q], sizeof why[q]))
            mask |= 1u << q;
    snprintf(dir, dsz, "%s", pdir);
    if (mask == CG_ALL) {
        close(pfd);
        return mask;
    }

    /* The dedicated child can only get what P already enables for its children: try it
     * when such a controller did not work directly in P. */
    char buf[1024];
    unsigned offered = 0;
    if (read_small_at(pfd, "cgroup.subtree_control", buf, sizeof buf) >= 0)
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            if (list_has(buf, quotas[q].ctrl, " \t\n"))
                offered |= 1u << q;
    char ddir[4096];
    if ((offered & ~mask) && path_cat(ddir, sizeof ddir, pdir, "/" CG_V2_DEDICATED)) {
        bool made = mkdirat(pfd, CG_V2_DEDICATED, 0755) == 0;
        int dfd = openat(pfd, CG_V2_DEDICATED, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        unsigned dmask = 0;
        char dwhy[A3S_QUOTA_COUNT][256];
        if (dfd >= 0) {
            for (int q = 0; q < A3S_QUOTA_COUNT; q++)
                if (v2_parent_ok(dfd, (enum a3s_quota)q, dwhy[q], sizeof dwhy[q]))
                    dmask |= 1u << q;
            close(dfd);
        }
        if (popcount(dmask) > popcount(mask)) {
            /* keep the direct attempt's reason for what neither place gives (it says
             * why the caller's cgroup could not), the child's for what only it lost */
            for (int q = 0; q < A3S_QUOTA_COUNT; q++)
                if (!(dmask & (1u << q)) && (mask & (1u << q)))
                    msgf(why[q], sizeof why[q], "%s", dwhy[q]);
            mask = dmask;
            snprintf(dir, dsz, "%s", ddir);
        } else if (made) {
            (void)unlinkat(pfd, CG_V2_DEDICATED, AT_REMOVEDIR);
        }
    }
    close(pfd);
    return mask;
}

/* ---------------------------------------------------------------- probe */

void a3s_cgroup_probe(const char *root, a3s_cgroup_caps *caps)
{
    if (!caps)
        return;
    memset(caps, 0, sizeof *caps);
    if (!root)
        root = CG_DEFAULT_ROOT;
    if (!cg_path_safe(root) || strlen(root) > 1024) {
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            msgf(caps->why_not[q], sizeof caps->why_not[q],
                 "no writable cgroup: cgroup root is not a clean absolute path");
        return;
    }
    char v2why[A3S_QUOTA_COUNT][256], v2dir[4096] = "";
    unsigned v2 = probe_v2(root, v2dir, sizeof v2dir, v2why);
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        if (v2 & (1u << q)) {
            caps->can[q] = true;
            caps->v2 = true;
            snprintf(caps->via[q], sizeof caps->via[q], "cgroup v2");
            snprintf(caps->dir[q], sizeof caps->dir[q], "%s", v2dir);
            continue;
        }
        char v1why[256];
        if (probe_v1(root, (enum a3s_quota)q, caps->dir[q], sizeof caps->dir[q], v1why,
                     sizeof v1why)) {
            caps->can[q] = true;
            snprintf(caps->via[q], sizeof caps->via[q], "cgroup v1 %s", quotas[q].ctrl);
            continue;
        }
        caps->dir[q][0] = '\0';
        msgf(caps->why_not[q], sizeof caps->why_not[q], "no writable cgroup: %s; %s", v2why[q],
             v1why);
    }
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
    if (write_at(d->fd, file, val) == 0 || (optional && errno == ENOENT))
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
    d->parent = open_dir_nofollow(pdir);
    if (d->parent < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open cgroup %s", pdir);
    if (!fs_is(d->parent, d->v2 ? CGROUP2_SUPER_MAGIC : CGROUP_SUPER_MAGIC))
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
                     names[0] ? "+" : "", quotas[q].name);
    char msg[sizeof err->msg];
    memcpy(msg, err->msg, sizeof msg);
    msgf(err->msg, sizeof err->msg, "cannot set up the %s quota: %s", names, msg);
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
            return a3s_fail(err, A3S_ERR_INVALID, "%s quota %lld is negative", quotas[q].name,
                            (long long)want[q]);
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
            return a3s_fail(err, A3S_ERR_SETUP, "cannot enforce the %s quota: %s", quotas[q].name,
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
                                quotas[q].name);
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
            read_small_at(d->fd, d->v2 ? "memory.events" : "memory.oom_control", buf, sizeof buf) >=
                0 &&
            key_u64(buf, "oom_kill", &v))
            ev->oom_kills += v;
        if ((d->quotas & (1u << A3S_QUOTA_PIDS)) &&
            read_small_at(d->fd, "pids.events", buf, sizeof buf) >= 0 && key_u64(buf, "max", &v))
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
        (void)write_at(d->fd, "cgroup.kill", "1");
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
    cg_dir d = {.parent = open_dir_nofollow(parent), .fd = -1, .procs = -1};
    if (d.parent < 0)
        return 0; /* the hierarchy is gone: so is the cgroup */
    d.v2 = fs_is(d.parent, CGROUP2_SUPER_MAGIC);
    if (!d.v2 && !fs_is(d.parent, CGROUP_SUPER_MAGIC)) {
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
