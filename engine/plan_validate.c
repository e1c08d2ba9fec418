/* Strict validation of a plan: every rule checked, every refusal naming the rule and
 * where it came from. */
#include "plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plan_internal.h"
#include "util.h"

/* AF_MAX on current Linux; families at or above it do not exist. */
#define A3S_AF_LIMIT 46
#define A3S_ERRNO_MAX 4095

/* How validation messages name a rule of each kind. */
static const char *const kind_labels[A3S_FS_KIND_COUNT] = {
    [A3S_FS_HIDE] = "hidden path",       [A3S_FS_TMPFS] = "tmpfs",
    [A3S_FS_RO] = "read-only path",      [A3S_FS_RW] = "writable root",
    [A3S_FS_PROTECT] = "protected path", [A3S_FS_MASK] = "masked path",
};

static const char *kind_label(enum a3s_fs_kind k)
{
    if ((int)k < 0 || k >= A3S_FS_KIND_COUNT)
        return "fs rule";
    return kind_labels[k];
}

static int oom(a3s_error *err)
{
    return a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
}

static bool env_name_ok(const char *s)
{
    if (!s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (s++; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

static bool plan_name_ok(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
              (*s >= '0' && *s <= '9') || *s == '_' || *s == '.' || *s == '-'))
            return false;
    return true;
}

static bool syscall_name_ok(const char *s)
{
    if (!s || !*s)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return false;
    return true;
}

/* A workspace entry name: one path component. */
static bool entry_name_ok(const char *s)
{
    return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* The root is usable to authorise a writable rule: set, clean and not "/". */
static bool root_covers(const char *root, const char *path)
{
    return root && a3s_path_is_clean(root) && strcmp(root, "/") != 0 &&
           a3s_path_within(path, root);
}

static int validate_names(const a3s_name_list *l, const char *what, a3s_error *err)
{
    char pb[1024];
    for (size_t i = 0; i < l->n; i++)
        if (!entry_name_ok(l->v[i].name))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: %s entry '%s' (%s) must be one non-empty path component "
                            "(no '/', not '.' or '..')",
                            what, l->v[i].name ? l->v[i].name : "(null)",
                            prov_str(&l->v[i].prov, pb, sizeof pb));
    return 0;
}

static int validate_env_names(const a3s_name_list *l, const char *what, bool prefix,
                              a3s_error *err)
{
    char pb[1024];
    for (size_t i = 0; i < l->n; i++)
        if (!env_name_ok(l->v[i].name))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: env %s %s '%s' (%s) must match [A-Za-z_][A-Za-z0-9_]*", what,
                            prefix ? "prefix" : "name", l->v[i].name ? l->v[i].name : "(null)",
                            prov_str(&l->v[i].prov, pb, sizeof pb));
    return 0;
}

static int validate_fs_rule(const a3s_plan *p, const a3s_fs_rule *r, a3s_error *err)
{
    char pb[1024];
    const char *label = kind_label(r->kind);
    const char *path = r->path ? r->path : "(null)";

    if ((int)r->kind < 0 || r->kind >= A3S_FS_KIND_COUNT)
        return a3s_fail(err, A3S_ERR_POLICY, "plan: fs rule %s (%s) has unknown kind %d", path,
                        prov_str(&r->prov, pb, sizeof pb), (int)r->kind);
    if (!r->path || !a3s_path_is_clean(r->path))
        return a3s_fail(err, A3S_ERR_POLICY,
                        "plan: %s %s (%s) is not a clean absolute path (relative, '.', '..', "
                        "'//' or trailing '/')",
                        label, path, prov_str(&r->prov, pb, sizeof pb));
    const char *nl = strchr(r->path, '\n');
    if (nl) /* quote only the part before it: the message stays one line */
        return a3s_fail(err, A3S_ERR_POLICY, "plan: %s %.*s... (%s) contains a newline", label,
                        (int)(nl - r->path), r->path, prov_str(&r->prov, pb, sizeof pb));
    bool root = strcmp(r->path, "/") == 0;
    switch (r->kind) {
    case A3S_FS_RW:
        if (root)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: writable root / (%s) is never allowed",
                            prov_str(&r->prov, pb, sizeof pb));
        if (!r->broaden && !root_covers(p->workspace, r->path) &&
            !root_covers(p->scratch, r->path))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: writable root %s (%s) is outside the workspace and the "
                            "scratch dir%s; declare it with { broaden = true } if that is "
                            "intended",
                            r->path, prov_str(&r->prov, pb, sizeof pb),
                            p->workspace || p->scratch ? ""
                                                       : " (neither root is set)");
        break;
    case A3S_FS_HIDE:
    case A3S_FS_MASK:
    case A3S_FS_TMPFS:
        if (root)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: %s / (%s) is refused: it would replace the whole root",
                            label, prov_str(&r->prov, pb, sizeof pb));
        break;
    case A3S_FS_PROTECT:
        if (p->workspace && !a3s_path_within(r->path, p->workspace))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: protected path %s (%s) is outside the workspace %s", r->path,
                            prov_str(&r->prov, pb, sizeof pb), p->workspace);
        break;
    case A3S_FS_RO:
    case A3S_FS_KIND_COUNT:
        break;
    }
    return 0;
}

static int cmp_fs_index(const void *a, const void *b, void *arg)
{
    const a3s_fs_rule *fs = arg;
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = strcmp(fs[i].path, fs[j].path);
    if (c)
        return c;
    return i < j ? -1 : i > j;
}

/* One kind per path: sort the rule indices by (path, index) and look at each group, so
 * the check stays O(n log n) after the scan added thousands of rules. Duplicates of the
 * same kind are harmless (the backend applies the same mount twice) and are kept. */
static int validate_fs_conflicts(const a3s_plan *p, a3s_error *err)
{
    if (p->nfs < 2)
        return 0;
    size_t *idx = malloc(p->nfs * sizeof *idx);
    if (!idx)
        return oom(err);
    for (size_t i = 0; i < p->nfs; i++)
        idx[i] = i;
    qsort_r(idx, p->nfs, sizeof *idx, cmp_fs_index, p->fs);
    int rc = 0;
    for (size_t g = 0; g < p->nfs && rc == 0;) {
        size_t e = g + 1;
        while (e < p->nfs && strcmp(p->fs[idx[g]].path, p->fs[idx[e]].path) == 0)
            e++;
        const a3s_fs_rule *a = &p->fs[idx[g]];
        for (size_t k = g + 1; k < e; k++) {
            const a3s_fs_rule *b = &p->fs[idx[k]];
            if (b->kind != a->kind) {
                char pa[1024], pb[1024];
                rc = a3s_fail(err, A3S_ERR_POLICY,
                              "plan: conflicting rules for %s: %s (%s) and %s (%s)", a->path,
                              a3s_fs_kind_name(a->kind), prov_str(&a->prov, pa, sizeof pa),
                              a3s_fs_kind_name(b->kind), prov_str(&b->prov, pb, sizeof pb));
                break;
            }
        }
        g = e;
    }
    free(idx);
    return rc;
}

static int validate_env(const a3s_env_plan *ep, a3s_error *err)
{
    char pa[1024], pb[1024];
    if (validate_env_names(&ep->keep, "keep", false, err) < 0 ||
        validate_env_names(&ep->keep_prefix, "keep", true, err) < 0 ||
        validate_env_names(&ep->strip, "strip", false, err) < 0 ||
        validate_env_names(&ep->strip_prefix, "strip", true, err) < 0)
        return -1;
    for (size_t i = 0; i < ep->nset; i++) {
        const a3s_kv *kv = &ep->set[i];
        if (!env_name_ok(kv->name))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: env set name '%s' (%s) must match [A-Za-z_][A-Za-z0-9_]*",
                            kv->name ? kv->name : "(null)", prov_str(&kv->prov, pa, sizeof pa));
        if (!kv->value)
            return a3s_fail(err, A3S_ERR_POLICY, "plan: env set %s (%s) has no value",
                            kv->name, prov_str(&kv->prov, pa, sizeof pa));
        /* strip is applied case-insensitively before set: a name in both says two
         * opposite things. A set name under a strip prefix is fine (re-homing XDG_*). */
        for (size_t j = 0; j < ep->strip.n; j++)
            if (strcasecmp(kv->name, ep->strip.v[j].name) == 0)
                return a3s_fail(err, A3S_ERR_POLICY,
                                "plan: env %s is both set (%s) and stripped (%s)", kv->name,
                                prov_str(&kv->prov, pa, sizeof pa),
                                prov_str(&ep->strip.v[j].prov, pb, sizeof pb));
    }
    return 0;
}

static int validate_seccomp(const a3s_seccomp_plan *sp, a3s_error *err)
{
    char pa[1024], pb[1024];
    for (size_t i = 0; i < sp->ndeny; i++) {
        const a3s_sc_rule *r = &sp->deny[i];
        if (!syscall_name_ok(r->syscall))
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: seccomp deny rule '%s' (%s): syscall name must match "
                            "[a-z0-9_]+",
                            r->syscall ? r->syscall : "(null)",
                            prov_str(&r->prov, pa, sizeof pa));
        if (r->errnum < 1 || r->errnum > A3S_ERRNO_MAX)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: seccomp deny rule %s (%s): errno %d is outside 1..%d",
                            r->syscall, prov_str(&r->prov, pa, sizeof pa), r->errnum,
                            A3S_ERRNO_MAX);
        /* libseccomp refuses two actions for one syscall; catch it here with provenance. */
        for (size_t j = 0; j < i; j++)
            if (strcmp(sp->deny[j].syscall, r->syscall) == 0 && sp->deny[j].errnum != r->errnum)
                return a3s_fail(err, A3S_ERR_POLICY,
                                "plan: seccomp deny rules for %s conflict: errno %d (%s) and "
                                "errno %d (%s)",
                                r->syscall, sp->deny[j].errnum,
                                prov_str(&sp->deny[j].prov, pb, sizeof pb), r->errnum,
                                prov_str(&r->prov, pa, sizeof pa));
    }
    for (size_t i = 0; i < sp->nsocket_allow; i++)
        if (sp->socket_allow[i] <= 0 || sp->socket_allow[i] >= A3S_AF_LIMIT)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: seccomp socket family %d (%s) is outside 1..%d",
                            sp->socket_allow[i], prov_str(&sp->prov, pa, sizeof pa),
                            A3S_AF_LIMIT - 1);
    if (sp->socket_errnum < 1 || sp->socket_errnum > A3S_ERRNO_MAX)
        return a3s_fail(err, A3S_ERR_POLICY,
                        "plan: seccomp socket errno %d (%s) is outside 1..%d", sp->socket_errnum,
                        prov_str(&sp->prov, pa, sizeof pa), A3S_ERRNO_MAX);
    return 0;
}

static int validate_limits(const a3s_limits *l, a3s_error *err)
{
    const struct {
        const char *name;
        int64_t v, lo, hi;
    } t[] = {
        {"timeout_ms", l->timeout_ms, 1, 86400000},
        {"output_bytes", l->output_bytes, 1, (int64_t)1 << 30},
        {"nofile", l->nofile, 16, 1048576},
        {"core_bytes", l->core_bytes, 0, INT64_MAX},
        {"scan_depth", l->scan_depth, 1, 4096},
        {"scan_entries", l->scan_entries, 1, 100000000},
        /* quotas: 0 is "none" (the policy API refuses an explicit 0) */
        {"processes", l->processes, 0, 1048576},
        {"memory_bytes", l->memory_bytes, 0, (int64_t)1 << 50},
        {"cpu_millicores", l->cpu_millicores, 0, 1024000},
        {"file_size_bytes", l->file_size_bytes, 0, (int64_t)1 << 60},
    };
    char pb[1024];
    if (l->memory_bytes > 0 && l->memory_bytes < (int64_t)1 << 20)
        return a3s_fail(err, A3S_ERR_POLICY,
                        "plan: limit memory_bytes = %" PRId64 " (%s) is below 1 MiB: nothing "
                        "would start",
                        l->memory_bytes, prov_str(&l->prov, pb, sizeof pb));
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (t[i].hi == INT64_MAX && t[i].v < t[i].lo)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: limit %s = %" PRId64 " (%s) must be >= %" PRId64, t[i].name,
                            t[i].v, prov_str(&l->prov, pb, sizeof pb), t[i].lo);
        if (t[i].v < t[i].lo || t[i].v > t[i].hi)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "plan: limit %s = %" PRId64 " (%s) is outside %" PRId64 "..%" PRId64,
                            t[i].name, t[i].v, prov_str(&l->prov, pb, sizeof pb), t[i].lo,
                            t[i].hi);
    }
    return 0;
}

/* Past validation the plan only changes by mistake: the builders refuse it. */
static void freeze(a3s_plan *p)
{
    a3s_name_list *lists[] = {&p->protect_dirs, &p->protect_files,   &p->secret_prefixes,
                              &p->scan_skip,    &p->env.keep,        &p->env.keep_prefix,
                              &p->env.strip,    &p->env.strip_prefix};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        lists[i]->frozen = true;
    p->frozen = true;
}

int a3s_plan_validate(a3s_plan *p, a3s_error *err)
{
    char pb[1024];
    if (!p)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: no plan");
    if (!plan_name_ok(p->name))
        return a3s_fail(err, A3S_ERR_POLICY, "plan: policy name '%s' must match [A-Za-z0-9_.-]+",
                        p->name ? p->name : "(null)");
    /* a3s_result.policy holds 127 characters. */
    if (strlen(p->name) > 127)
        return a3s_fail(err, A3S_ERR_POLICY, "plan: policy name '%.40s...' is longer than 127",
                        p->name);
    const char *roots[4] = {p->workspace, p->scratch, p->home, p->tmp};
    static const char *const rname[4] = {"workspace", "scratch", "home", "tmp"};
    for (int i = 0; i < 4; i++)
        if (roots[i] && !a3s_path_is_clean(roots[i]))
            return a3s_fail(err, A3S_ERR_POLICY, "plan: %s root '%s' is not a clean absolute path",
                            rname[i], roots[i]);
    if (p->network != A3S_NET_NONE)
        return a3s_fail(err, A3S_ERR_POLICY,
                        "plan: network mode %d (%s) is unknown (only \"none\" exists)",
                        p->network, prov_str(&p->network_prov, pb, sizeof pb));
    for (size_t i = 0; i < p->nfs; i++)
        if (validate_fs_rule(p, &p->fs[i], err) < 0)
            return -1;
    if (validate_fs_conflicts(p, err) < 0 ||
        validate_names(&p->protect_dirs, "protect_dirs", err) < 0 ||
        validate_names(&p->protect_files, "protect_files", err) < 0 ||
        validate_names(&p->secret_prefixes, "secret_prefixes", err) < 0 ||
        validate_names(&p->scan_skip, "scan_skip", err) < 0 || validate_env(&p->env, err) < 0 ||
        validate_seccomp(&p->seccomp, err) < 0 || validate_limits(&p->limits, err) < 0)
        return -1;
    freeze(p);
    return 0;
}
