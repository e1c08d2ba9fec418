/* What a run of this backend would refuse of a frozen plan, found before anything of the
 * run is made (backend.h plan_check): a checked policy and a run refuse the same things,
 * with the rule and the policy line that produced it. Shared by linux-bwrap and
 * process-host: a seccomp plan is a Linux plan whichever of them enforces it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* No writable rule may cover or lie in the sandbox's state directory (where it may be:
 * under the state root or the fallback one): it holds what later runs act on and trust, the records
 * of what to remove and the cached policy digests. A command that could write there could
 * forge them. */
static int check_state_dir(const a3s_backend_host *h, const a3s_plan *p, a3s_error *err)
{
    char pb[1024], dirs[2][PATH_MAX];
    const char *roots[] = {a3s_stale_root(h->tmp), a3s_stale_fallback_root()};
    for (size_t k = 0; k < 2; k++) {
        int n = snprintf(dirs[k], sizeof dirs[k], "%s%sa3s-sandbox-state-%lu", roots[k],
                         strcmp(roots[k], "/") ? "/" : "", (unsigned long)geteuid());
        if (n < 0 || (size_t)n >= sizeof dirs[k])
            return a3s_fail(err, A3S_ERR_POLICY, "plan: state directory path too long");
    }
    for (size_t i = 0; i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (r->kind != A3S_FS_RW || !r->path)
            continue;
        for (size_t k = 0; k < 2; k++)
            if (a3s_path_within(dirs[k], r->path) || a3s_path_within(r->path, dirs[k]))
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
