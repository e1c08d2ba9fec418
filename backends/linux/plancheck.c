/* What a run of this backend would refuse of a frozen plan, found before anything of the
 * run is made (backend.h plan_check): a checked policy and a run refuse the same things,
 * with the rule and the policy line that produced it. Shared by linux-bwrap and
 * process-host: a seccomp plan is a Linux plan whichever of them enforces it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "a3s_seccomp.h"
#include "linux_backend.h"
#include "stale.h"
#include "util.h"

static const char *prov_str(const a3s_prov *pv, bool discovered, char *buf, size_t n)
{
    if (pv->file)
        snprintf(buf, n, "%s:%d", pv->file, pv->line);
    else
        snprintf(buf, n, "%s", discovered ? "<scan>" : "<engine>");
    return buf;
}

/* Every deny rule names a syscall libseccomp knows (on some architecture: one absent
 * here is still a name the filter compiler accepts); otherwise every run fails when it
 * compiles the filter. */
static int check_syscalls(const a3s_seccomp_plan *sp, a3s_error *err)
{
    char pb[1024];
    for (size_t i = 0; i < sp->ndeny; i++) {
        const a3s_sc_rule *r = &sp->deny[i];
        if (!a3s_seccomp_syscall_known(r->syscall))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: seccomp deny rule '%s' (%s) names no syscall that libseccomp "
                            "knows; every run would be refused",
                            r->syscall ? r->syscall : "(null)",
                            prov_str(&r->prov, false, pb, sizeof pb));
    }
    return 0;
}

/* 1 when path does not exist, 0 when it does or cannot be told (the run decides then).
 * Inside the workspace, through its fd: the workspace was opened once. */
static int path_missing(const a3s_backend_host *h, const char *path)
{
    struct stat st;
    int rc;
    if (h->workspace && h->ws_fd >= 0 && a3s_path_within(path, h->workspace)) {
        size_t n = strlen(h->workspace);
        const char *rel = path[n] ? path + n + 1 : ".";
        rc = fstatat(h->ws_fd, rel, &st, AT_SYMLINK_NOFOLLOW);
    } else {
        rc = lstat(path, &st);
    }
    return rc < 0 && (errno == ENOENT || errno == ENOTDIR);
}

/* Every non-optional path exists on this host (masks are never required: a missing
 * secret has nothing to hide). The scratch dir is made by the run itself. */
static int check_paths(const a3s_backend_host *h, const a3s_plan *p, a3s_error *err)
{
    char pb[1024];
    for (size_t i = 0; i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (r->optional || r->kind == A3S_FS_MASK || !r->path)
            continue;
        if (p->scratch && a3s_path_within(r->path, p->scratch))
            continue;
        if (path_missing(h, r->path))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: %s path %s (%s) does not exist on this host; a run refuses "
                            "it (give { optional = true } if it may be missing)",
                            a3s_fs_kind_name(r->kind), r->path,
                            prov_str(&r->prov, r->discovered, pb, sizeof pb));
    }
    return 0;
}

/* path with every symbolic link resolved: its longest existing prefix through realpath,
 * the rest as written (it does not exist: no link below it yet). False: not resolvable. */
static bool canonical(const char *path, char out[PATH_MAX])
{
    if (realpath(path, out))
        return true;
    if (errno != ENOENT && errno != ENOTDIR)
        return false;
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return false; /* "/x" missing: "/" exists, so this is not ENOENT */
    char parent[PATH_MAX];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof parent)
        return false;
    memcpy(parent, path, n);
    parent[n] = '\0';
    char base[PATH_MAX];
    if (!canonical(parent, base))
        return false;
    int w = snprintf(out, PATH_MAX, "%s%s", strcmp(base, "/") ? base : "", slash);
    return w > 0 && w < PATH_MAX;
}

/* No writable rule may reach the sandbox's state directory, whichever spelling it uses:
 * it holds what later runs act on and trust (the records of what to remove, the policy
 * digests), and a command that could write there could forge them. The directory may be
 * under /tmp, TMPDIR or the fallback root; each is compared resolved, and a writable
 * root outside the workspace and the scratch dir must be spelled as it is (no symbolic
 * link on its way: what is checked here is then what is mounted). */
static int check_state_dir(const a3s_backend_host *h, const a3s_plan *p, a3s_error *err)
{
    char pb[1024], dirs[3][PATH_MAX], canon[PATH_MAX];
    const char *roots[3] = {a3s_stale_root(h->tmp), h->tmp ? h->tmp : "/tmp",
                            a3s_stale_fallback_root()};
    size_t nd = 0;
    for (size_t k = 0; k < 3; k++) {
        if (!canonical(roots[k], canon))
            continue; /* a root that cannot be resolved holds no state of ours */
        int n = snprintf(dirs[nd], sizeof dirs[nd], "%s/a3s-sandbox-state-%lu",
                         strcmp(canon, "/") ? canon : "", (unsigned long)geteuid());
        if (n < 0 || (size_t)n >= sizeof dirs[nd])
            return a3s_fail(err, A3S_ERR_POLICY, "plan: state directory path too long");
        nd++;
    }
    for (size_t i = 0; i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (r->kind != A3S_FS_RW || !r->path)
            continue;
        bool ours = (p->workspace && a3s_path_within(r->path, p->workspace)) ||
                    (p->scratch && a3s_path_within(r->path, p->scratch));
        if (!canonical(r->path, canon))
            return a3s_fail_errno(err, A3S_ERR_POLICY, errno,
                                  "plan: writable root %s (%s) cannot be resolved", r->path,
                                  prov_str(&r->prov, r->discovered, pb, sizeof pb));
        if (!ours && strcmp(canon, r->path) != 0)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: writable root %s (%s) is reached through a symbolic link "
                            "(it is %s); write it as it is",
                            r->path, prov_str(&r->prov, r->discovered, pb, sizeof pb), canon);
        for (size_t k = 0; k < nd; k++)
            if (a3s_path_within(dirs[k], canon) || a3s_path_within(canon, dirs[k]))
                return a3s_fail(err, A3S_ERR_POLICY,
                                "plan: writable root %s (%s) would expose the sandbox's state "
                                "directory %s, which is never writable by a command",
                                r->path, prov_str(&r->prov, r->discovered, pb, sizeof pb),
                                dirs[k]);
    }
    return 0;
}

int a3s_linux_plan_check(const a3s_backend_host *h, const a3s_plan *p, bool host, a3s_error *err)
{
    if (check_syscalls(&p->seccomp, err) < 0)
        return -1;
    return host ? (check_paths(h, p, err) < 0 ? -1 : check_state_dir(h, p, err)) : 0;
}
