/* What this host can enforce with cgroups (see cgroup.h): finding, for each quota, a
 * place where per-execution cgroups can be made, by trying it.
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
 * or refuse the quota. */
#include "cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup_internal.h"
#include "util.h"

#define CG_DEFAULT_ROOT "/sys/fs/cgroup"
#define CG_V2_DEDICATED "a3s-sandbox"
#define CG_ALL ((1u << A3S_QUOTA_COUNT) - 1)

/* Short errno names keep why_not (256 bytes) readable: "not writable (EACCES)". */
static const char *errname(int e)
{
    const char *n = a3s_errno_symbol(e);
    return n ? n : strerror(e);
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

/* The caller's cgroup in the v1 hierarchy holding `ctrl`, or in v2 when ctrl is NULL
 * (the "0::" line). 0, or -1 with errno: ENOENT no such line, EINVAL an unsafe path
 * (escaped, or "/.." when the cgroup is outside our cgroup namespace). */
static int self_cgroup(const char *ctrl, char *out, size_t sz)
{
    char buf[16384];
    if (a3s_cg_read_small_at(AT_FDCWD, "/proc/self/cgroup", buf, sizeof buf) < 0)
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
        if (!a3s_cg_path_safe(path)) {
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
    const char *c = a3s_cg_quotas[q].ctrl;
    char self[4096], name[NAME_MAX + 1];
    if (self_cgroup(c, self, sizeof self) != 0) {
        if (errno == ENOENT)
            a3s_cg_msgf(why, wsz, "v1 %s hierarchy not in use (not in /proc/self/cgroup)", c);
        else
            a3s_cg_msgf(why, wsz, "v1 %s: unusable own cgroup path (%s)", c, errname(errno));
        return false;
    }
    int rfd = a3s_cg_open_dir_nofollow(root);
    if (rfd < 0) {
        a3s_cg_msgf(why, wsz, "v1 %s: cgroup root unusable (%s)", c, errname(errno));
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
            a3s_cg_msgf(why, wsz, "v1 %s: hierarchy link leads outside the cgroup root", c);
            return false;
        }
    } else if (errno == EINVAL) {
        snprintf(name, sizeof name, "%s", c); /* not a link */
    } else {
        int e = errno;
        close(rfd);
        a3s_cg_msgf(why, wsz, "v1 %s hierarchy not mounted (%s)", c, errname(e));
        return false;
    }
    int hfd = openat(rfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int e = errno;
    close(rfd);
    if (hfd < 0) {
        a3s_cg_msgf(why, wsz, "v1 %s hierarchy not mounted (%s)", c, errname(e));
        return false;
    }
    if (!a3s_cg_fs_is(hfd, CGROUP_SUPER_MAGIC)) {
        close(hfd);
        a3s_cg_msgf(why, wsz, "v1 %s: %s/%s is not a cgroup v1 hierarchy", c, root, name);
        return false;
    }
    int dfd = a3s_cg_open_below(hfd, self);
    e = errno;
    close(hfd);
    if (dfd < 0) {
        a3s_cg_msgf(why, wsz, "v1 %s: own cgroup %s not found (%s)", c, self, errname(e));
        return false;
    }
    char hier[4096];
    int hn = snprintf(hier, sizeof hier, "%s/%s", strcmp(root, "/") == 0 ? "" : root, name);
    if (hn < 0 || (size_t)hn >= sizeof hier || !path_cat(dir, dsz, hier, self)) {
        close(dfd);
        a3s_cg_msgf(why, wsz, "v1 %s: cgroup path too long", c);
        return false;
    }
    int rc = probe_child(dfd, a3s_cg_quotas[q].v1_file);
    e = errno;
    close(dfd);
    if (rc == -1) {
        a3s_cg_msgf(why, wsz, "v1 %s hierarchy not writable (%s)", c, errname(e));
        return false;
    }
    if (rc == -2) {
        a3s_cg_msgf(why, wsz, "v1 %s: a new cgroup has no %s", c, a3s_cg_quotas[q].v1_file);
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
    const char *c = a3s_cg_quotas[q].ctrl;
    char buf[1024];
    if (a3s_cg_read_small_at(dfd, "cgroup.controllers", buf, sizeof buf) < 0) {
        a3s_cg_msgf(why, wsz, "v2: cgroup.controllers unreadable (%s)", errname(errno));
        return false;
    }
    if (!list_has(buf, c, " \t\n")) {
        a3s_cg_msgf(why, wsz, "v2 has no delegated %s controller", c);
        return false;
    }
    if (a3s_cg_read_small_at(dfd, "cgroup.subtree_control", buf, sizeof buf) < 0) {
        a3s_cg_msgf(why, wsz, "v2: cgroup.subtree_control unreadable (%s)", errname(errno));
        return false;
    }
    if (!list_has(buf, c, " \t\n")) {
        char cmd[32];
        snprintf(cmd, sizeof cmd, "+%s", c);
        if (a3s_cg_write_at(dfd, "cgroup.subtree_control", cmd) != 0) {
            if (errno == EBUSY)
                a3s_cg_msgf(why, wsz,
                            "v2 %s controller cannot be enabled for child cgroups (EBUSY: the "
                            "caller's cgroup has processes of its own)",
                            c);
            else
                a3s_cg_msgf(why, wsz, "v2 %s controller cannot be enabled for child cgroups (%s)",
                            c, errname(errno));
            return false;
        }
    }
    int rc = probe_child(dfd, a3s_cg_quotas[q].v2_file);
    if (rc == -1) {
        a3s_cg_msgf(why, wsz, "v2 cgroup not writable (%s)", errname(errno));
        return false;
    }
    if (rc == -2) {
        a3s_cg_msgf(why, wsz, "v2: a new cgroup has no %s", a3s_cg_quotas[q].v2_file);
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
    int rfd = a3s_cg_open_dir_nofollow(root);
    if (rfd < 0) {
        a3s_cg_msgf(fbuf, sizeof fbuf, "v2: cgroup root unusable (%s)", errname(errno));
        fail = fbuf;
    } else {
        /* a pure v2 host mounts cgroup2 at the root, a hybrid one at <root>/unified */
        if (a3s_cg_fs_is(rfd, CGROUP2_SUPER_MAGIC)) {
            snprintf(base, sizeof base, "%s", root);
        } else {
            int ufd = openat(rfd, "unified", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            bool v2 = ufd >= 0 && a3s_cg_fs_is(ufd, CGROUP2_SUPER_MAGIC);
            if (ufd >= 0)
                close(ufd);
            if (!v2 || !path_cat(base, sizeof base, root, "/unified"))
                fail = "no cgroup v2 mount";
        }
        close(rfd);
    }
    if (!fail && self_cgroup(NULL, self, sizeof self) != 0) {
        a3s_cg_msgf(fbuf, sizeof fbuf, "v2: no usable 0:: line in /proc/self/cgroup (%s)",
                    errname(errno));
        fail = fbuf;
    }
    if (!fail && !path_cat(pdir, sizeof pdir, base, self))
        fail = "v2: cgroup path too long";
    int pfd = -1;
    if (!fail) {
        pfd = a3s_cg_open_dir_nofollow(pdir);
        if (pfd < 0) {
            a3s_cg_msgf(fbuf, sizeof fbuf, "v2: own cgroup %s not accessible (%s)", self,
                        errname(errno));
            fail = fbuf;
        } else if (!a3s_cg_fs_is(pfd, CGROUP2_SUPER_MAGIC)) {
            fail = "v2: own cgroup is not on a cgroup2 filesystem";
        }
    }
    if (fail) {
        if (pfd >= 0)
            close(pfd);
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            a3s_cg_msgf(why[q], sizeof why[q], "%s", fail);
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
    if (a3s_cg_read_small_at(pfd, "cgroup.subtree_control", buf, sizeof buf) >= 0)
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            if (list_has(buf, a3s_cg_quotas[q].ctrl, " \t\n"))
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
                    a3s_cg_msgf(why[q], sizeof why[q], "%s", dwhy[q]);
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
    if (!a3s_cg_path_safe(root) || strlen(root) > 1024) {
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            a3s_cg_msgf(caps->why_not[q], sizeof caps->why_not[q],
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
            snprintf(caps->via[q], sizeof caps->via[q], "cgroup v1 %s", a3s_cg_quotas[q].ctrl);
            continue;
        }
        caps->dir[q][0] = '\0';
        a3s_cg_msgf(caps->why_not[q], sizeof caps->why_not[q], "no writable cgroup: %s; %s",
                    v2why[q], v1why);
    }
}
