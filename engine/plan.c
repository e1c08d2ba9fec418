/* The plan model: lifecycle, builders, and the names of kinds and errnos.
 *
 * A plan is built (bindings/lua), validated (plan_validate.c, which freezes it), then
 * only read: every builder refuses a frozen plan, so what was validated and digested is
 * what the backend enforces. */
#include "plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* ---------------------------------------------------------------- names */

static const char *const kind_names[A3S_FS_KIND_COUNT] = {
    [A3S_FS_HIDE] = "hide",        [A3S_FS_TMPFS] = "tmpfs",     [A3S_FS_RO] = "read_only",
    [A3S_FS_RW] = "writable",      [A3S_FS_PROTECT] = "protect", [A3S_FS_MASK] = "mask",
};

const char *a3s_fs_kind_name(enum a3s_fs_kind k)
{
    if ((int)k < 0 || k >= A3S_FS_KIND_COUNT)
        return "unknown";
    return kind_names[k];
}

/* The errnos a policy may name, and the only ones named in a plan (the canonical form,
 * so the digest, included: a number otherwise). Their names are util.c's table's. */
static const int policy_errnos[] = {EPERM,  ENOSYS, EACCES, EAFNOSUPPORT,
                                    EINVAL, EROFS,  ENOENT, EOPNOTSUPP /* = ENOTSUP */};

static bool policy_errno(int errnum)
{
    for (size_t i = 0; i < sizeof policy_errnos / sizeof policy_errnos[0]; i++)
        if (policy_errnos[i] == errnum)
            return true;
    return false;
}

int a3s_errno_from_name(const char *name)
{
    int e = a3s_errno_from_symbol(name);
    return e > 0 && policy_errno(e) ? e : -1;
}

const char *a3s_errno_name(int errnum)
{
    return policy_errno(errnum) ? a3s_errno_symbol(errnum) : NULL;
}

/* ---------------------------------------------------------------- small helpers */

static int oom(a3s_error *err)
{
    return a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
}

/* A builder called after validation: a bug in the caller, never a policy error. */
static int frozen(a3s_error *err)
{
    return a3s_fail(err, A3S_ERR_INTERNAL, "plan: frozen after validation");
}

/* Make room for one more element of size `elem` in *v (n used, *cap allocated). */
static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 8;
    if (ncap > SIZE_MAX / elem)
        return -1;
    void *nv = realloc(*v, ncap * elem);
    if (!nv)
        return -1;
    *v = nv;
    *cap = ncap;
    return 0;
}

static int prov_init(a3s_prov *pv, const char *file, int line)
{
    pv->file = NULL;
    pv->line = line;
    if (file && !(pv->file = strdup(file)))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- lifecycle */

a3s_plan *a3s_plan_new(void)
{
    a3s_plan *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->network = A3S_NET_NONE;
    p->seccomp.socketpair_unix = true;
    p->seccomp.deny_clone_ns = true;
    p->seccomp.deny_tty_inject = true;
    p->seccomp.socket_errnum = EAFNOSUPPORT;
    p->limits.timeout_ms = 120000;
    p->limits.output_bytes = 102400;
    p->limits.nofile = 1024;
    p->limits.core_bytes = 0;
    p->limits.scan_depth = 64;
    p->limits.scan_entries = 1000000;
    return p;
}

static void name_list_free(a3s_name_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].prov.file);
    }
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

void a3s_plan_free(a3s_plan *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->source);
    free(p->network_prov.file);
    free(p->host_root_prov.file);
    for (size_t i = 0; i < p->nfs; i++) {
        free(p->fs[i].path);
        free(p->fs[i].prov.file);
    }
    free(p->fs);
    name_list_free(&p->protect_dirs);
    name_list_free(&p->protect_files);
    name_list_free(&p->secret_prefixes);
    name_list_free(&p->scan_skip);
    name_list_free(&p->env.keep);
    name_list_free(&p->env.keep_prefix);
    name_list_free(&p->env.strip);
    name_list_free(&p->env.strip_prefix);
    for (size_t i = 0; i < p->env.nset; i++) {
        free(p->env.set[i].name);
        free(p->env.set[i].value);
        free(p->env.set[i].prov.file);
    }
    free(p->env.set);
    for (size_t i = 0; i < p->seccomp.ndeny; i++) {
        free(p->seccomp.deny[i].syscall);
        free(p->seccomp.deny[i].prov.file);
    }
    free(p->seccomp.deny);
    free(p->seccomp.socket_allow);
    free(p->seccomp.prov.file);
    free(p->limits.prov.file);
    free(p->workspace);
    free(p->scratch);
    free(p->home);
    free(p->tmp);
    free(p);
}

/* ---------------------------------------------------------------- builders */

int a3s_plan_set_roots(a3s_plan *p, const char *workspace, const char *scratch,
                       const char *home, const char *tmp, a3s_error *err)
{
    const char *in[4] = {workspace, scratch, home, tmp};
    static const char *const what[4] = {"workspace", "scratch", "home", "tmp"};
    char *out[4] = {NULL, NULL, NULL, NULL};

    if (!p)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: no plan");
    if (p->frozen)
        return frozen(err);
    /* Roots decide the symbolic encoding and where writable roots may lie: they must be
     * canonical, or the digest and the RW check would silently mean something else. */
    for (int i = 0; i < 4; i++)
        if (in[i] && !a3s_path_is_clean(in[i]))
            return a3s_fail(err, A3S_ERR_INVALID,
                            "plan: %s root '%s' is not a clean absolute path", what[i], in[i]);
    for (int i = 0; i < 4; i++) {
        if (in[i] && !(out[i] = strdup(in[i]))) {
            for (int j = 0; j < i; j++)
                free(out[j]);
            return oom(err);
        }
    }
    free(p->workspace);
    free(p->scratch);
    free(p->home);
    free(p->tmp);
    p->workspace = out[0];
    p->scratch = out[1];
    p->home = out[2];
    p->tmp = out[3];
    return 0;
}

int a3s_plan_add_fs(a3s_plan *p, enum a3s_fs_kind kind, const char *path, bool optional,
                    bool discovered, const char *file, int line, a3s_error *err)
{
    if (!p || !path)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: fs rule without a path");
    if (p->frozen)
        return frozen(err);
    if ((int)kind < 0 || kind >= A3S_FS_KIND_COUNT)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: fs rule %s has unknown kind %d", path,
                        (int)kind);
    if (grow((void **)&p->fs, &p->capfs, p->nfs, sizeof *p->fs) < 0)
        return oom(err);
    a3s_fs_rule r = {.kind = kind, .optional = optional, .discovered = discovered};
    if (!(r.path = strdup(path)) || prov_init(&r.prov, file, line) < 0) {
        free(r.path);
        return oom(err);
    }
    p->fs[p->nfs++] = r;
    return 0;
}

int a3s_plan_add_name(a3s_name_list *l, const char *name, const char *file, int line,
                      a3s_error *err)
{
    if (!l || !name)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: name list entry without a name");
    if (l->frozen)
        return frozen(err);
    if (grow((void **)&l->v, &l->cap, l->n, sizeof *l->v) < 0)
        return oom(err);
    a3s_name e = {0};
    if (!(e.name = strdup(name)) || prov_init(&e.prov, file, line) < 0) {
        free(e.name);
        return oom(err);
    }
    l->v[l->n++] = e;
    return 0;
}

int a3s_plan_env_set(a3s_plan *p, const char *name, const char *value, const char *file,
                     int line, a3s_error *err)
{
    if (!p || !name || !value)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: env set without a name or value");
    if (p->frozen)
        return frozen(err);
    if (grow((void **)&p->env.set, &p->env.capset, p->env.nset, sizeof *p->env.set) < 0)
        return oom(err);
    a3s_kv kv = {0};
    if (!(kv.name = strdup(name)) || !(kv.value = strdup(value)) ||
        prov_init(&kv.prov, file, line) < 0) {
        free(kv.name);
        free(kv.value);
        return oom(err);
    }
    p->env.set[p->env.nset++] = kv;
    return 0;
}

int a3s_plan_seccomp_deny(a3s_plan *p, const char *syscall, int errnum, const char *file,
                          int line, a3s_error *err)
{
    if (!p || !syscall)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: seccomp deny rule without a syscall");
    if (p->frozen)
        return frozen(err);
    a3s_seccomp_plan *sp = &p->seccomp;
    if (grow((void **)&sp->deny, &sp->capdeny, sp->ndeny, sizeof *sp->deny) < 0)
        return oom(err);
    a3s_sc_rule r = {.errnum = errnum};
    if (!(r.syscall = strdup(syscall)) || prov_init(&r.prov, file, line) < 0) {
        free(r.syscall);
        return oom(err);
    }
    sp->deny[sp->ndeny++] = r;
    return 0;
}

int a3s_plan_seccomp_allow_family(a3s_plan *p, int family, a3s_error *err)
{
    if (!p)
        return a3s_fail(err, A3S_ERR_INVALID, "plan: no plan");
    if (p->frozen)
        return frozen(err);
    a3s_seccomp_plan *sp = &p->seccomp;
    if (grow((void **)&sp->socket_allow, &sp->capsocket_allow, sp->nsocket_allow,
             sizeof *sp->socket_allow) < 0)
        return oom(err);
    sp->socket_allow[sp->nsocket_allow++] = family;
    return 0;
}
