/* Monotonic policy updates: is a new plan broader than the current one, field by field?
 * Both plans must have been evaluated against the same context: host-derived rules then
 * appear in both alike, and every difference is the policies'. `discovered` is only a
 * label, so it exempts nothing: a discovered widening is a widening. */
#include "update.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static bool has_fs(const a3s_plan *p, enum a3s_fs_kind kind, const char *path)
{
    for (size_t i = 0; i < p->nfs; i++)
        if (p->fs[i].kind == kind && !strcmp(p->fs[i].path, path))
            return true;
    return false;
}

/* Is path inside a declared root of one of the two kinds (a sub-path adds nothing)? */
static bool within_kind(const a3s_plan *p, const char *path, enum a3s_fs_kind k1,
                        enum a3s_fs_kind k2)
{
    for (size_t i = 0; i < p->nfs; i++)
        if ((p->fs[i].kind == k1 || p->fs[i].kind == k2) && a3s_path_within(path, p->fs[i].path))
            return true;
    return false;
}

static bool has_name(const a3s_name_list *l, const char *name, bool nocase)
{
    for (size_t i = 0; i < l->n; i++)
        if (nocase ? !strcasecmp(l->v[i].name, name) : !strcmp(l->v[i].name, name))
            return true;
    return false;
}

static bool has_set(const a3s_env_plan *e, const a3s_kv *kv)
{
    for (size_t i = 0; i < e->nset; i++)
        if (!strcmp(e->set[i].name, kv->name) && !strcmp(e->set[i].value, kv->value))
            return true;
    return false;
}

static bool has_deny(const a3s_seccomp_plan *s, const char *syscall)
{
    for (size_t i = 0; i < s->ndeny; i++)
        if (!strcmp(s->deny[i].syscall, syscall))
            return true;
    return false;
}

static bool has_family(const a3s_seccomp_plan *s, int fam)
{
    for (size_t i = 0; i < s->nsocket_allow; i++)
        if (s->socket_allow[i] == fam)
            return true;
    return false;
}

#define BROADENS(...)                                                                  \
    do {                                                                               \
        snprintf(why, n, __VA_ARGS__);                                                 \
        return true;                                                                   \
    } while (0)

/* Names that must not disappear (protections) or must not appear (exposures). */
static bool names_broaden(const a3s_name_list *cur, const a3s_name_list *next, bool removal,
                          bool nocase, const char *field, char *why, size_t n)
{
    const a3s_name_list *a = removal ? cur : next, *b = removal ? next : cur;
    for (size_t i = 0; i < a->n; i++)
        if (!has_name(b, a->v[i].name, nocase))
            BROADENS("%s %s '%s'", removal ? "removes" : "adds", field, a->v[i].name);
    return false;
}

bool a3s_plan_broadens(const a3s_plan *cur, const a3s_plan *next, char *why, size_t n)
{
    if (next->network != cur->network && next->network != A3S_NET_NONE)
        BROADENS("changes network from none");
    if (next->allow_host_root && !cur->allow_host_root)
        BROADENS("allows host root");

    /* Filesystem: new writable or read-only exposures broaden; losing a hide, tmpfs,
     * protection or mask broadens. */
    for (size_t i = 0; i < next->nfs; i++) {
        const a3s_fs_rule *r = &next->fs[i];
        if (has_fs(cur, r->kind, r->path))
            continue;
        if (r->kind == A3S_FS_RW && !within_kind(cur, r->path, A3S_FS_RW, A3S_FS_RW))
            BROADENS("adds writable root %s", r->path);
        if (r->kind == A3S_FS_RO && !within_kind(cur, r->path, A3S_FS_RW, A3S_FS_RO))
            BROADENS("adds read-only exposure %s", r->path);
    }
    for (size_t i = 0; i < cur->nfs; i++) {
        const a3s_fs_rule *r = &cur->fs[i];
        if (r->kind == A3S_FS_RW || r->kind == A3S_FS_RO)
            continue;
        if (!has_fs(next, r->kind, r->path))
            BROADENS("removes %s rule %s", a3s_fs_kind_name(r->kind), r->path);
    }
    if (names_broaden(&cur->protect_dirs, &next->protect_dirs, true, true,
                      "protected directory", why, n) ||
        names_broaden(&cur->protect_files, &next->protect_files, true, true,
                      "protected file", why, n) ||
        names_broaden(&cur->secret_prefixes, &next->secret_prefixes, true, true,
                      "secret prefix", why, n) ||
        names_broaden(&cur->scan_skip, &next->scan_skip, false, true, "scan skip", why, n))
        return true;

    /* Environment: more kept, less stripped, or any change of what is set. */
    if (names_broaden(&cur->env.keep, &next->env.keep, false, false, "env keep", why, n) ||
        names_broaden(&cur->env.keep_prefix, &next->env.keep_prefix, false, false,
                      "env keep prefix", why, n) ||
        names_broaden(&cur->env.strip, &next->env.strip, true, true, "env strip", why, n) ||
        names_broaden(&cur->env.strip_prefix, &next->env.strip_prefix, true, true,
                      "env strip prefix", why, n))
        return true;
    for (size_t i = 0; i < next->env.nset; i++)
        if (!has_set(&cur->env, &next->env.set[i]))
            BROADENS("sets env %s to a new value", next->env.set[i].name);
    for (size_t i = 0; i < cur->env.nset; i++)
        if (!has_set(&next->env, &cur->env.set[i]))
            BROADENS("no longer sets env %s", cur->env.set[i].name);

    /* Seccomp: fewer denials, more socket families, weaker switches. */
    for (size_t i = 0; i < cur->seccomp.ndeny; i++)
        if (!has_deny(&next->seccomp, cur->seccomp.deny[i].syscall))
            BROADENS("no longer denies syscall %s", cur->seccomp.deny[i].syscall);
    for (size_t i = 0; i < next->seccomp.nsocket_allow; i++)
        if (!has_family(&cur->seccomp, next->seccomp.socket_allow[i]))
            BROADENS("allows socket family %d", next->seccomp.socket_allow[i]);
    if (next->seccomp.socketpair_unix && !cur->seccomp.socketpair_unix)
        BROADENS("allows socketpair(AF_UNIX)");
    if (!next->seccomp.deny_clone_ns && cur->seccomp.deny_clone_ns)
        BROADENS("allows clone with namespace flags");
    if (!next->seccomp.deny_tty_inject && cur->seccomp.deny_tty_inject)
        BROADENS("allows TIOCSTI/TIOCLINUX");

    /* Limits: raising one broadens; lowering narrows. Scan limits only decide when to
     * refuse, so they are neither. */
    const struct {
        const char *name;
        int64_t a, b;
    } lim[] = {
        {"timeout_ms", cur->limits.timeout_ms, next->limits.timeout_ms},
        {"output_bytes", cur->limits.output_bytes, next->limits.output_bytes},
        {"nofile", cur->limits.nofile, next->limits.nofile},
        {"core_bytes", cur->limits.core_bytes, next->limits.core_bytes},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].b > lim[i].a)
            BROADENS("raises limit %s from %lld to %lld", lim[i].name, (long long)lim[i].a,
                     (long long)lim[i].b);
    /* Quotas: 0 is "none". Adding one narrows; removing or raising one broadens. */
    const struct {
        const char *name;
        int64_t a, b;
    } quota[] = {
        {"processes", cur->limits.processes, next->limits.processes},
        {"memory_bytes", cur->limits.memory_bytes, next->limits.memory_bytes},
        {"cpu_millicores", cur->limits.cpu_millicores, next->limits.cpu_millicores},
        {"file_size_bytes", cur->limits.file_size_bytes, next->limits.file_size_bytes},
    };
    for (size_t i = 0; i < sizeof quota / sizeof quota[0]; i++) {
        if (quota[i].a && !quota[i].b)
            BROADENS("removes quota %s", quota[i].name);
        if (quota[i].a && quota[i].b > quota[i].a)
            BROADENS("raises quota %s from %lld to %lld", quota[i].name,
                     (long long)quota[i].a, (long long)quota[i].b);
    }
    if (n)
        why[0] = '\0';
    return false;
}
