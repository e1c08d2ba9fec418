/* The enforcement plan: owned C data, strict validation, canonical JSON and digest.
 *
 * Canonical encoding (a3s_plan_version 1), the input of the digest:
 *   json_dumps(JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII) of
 *   {"a3s_plan_version":1, "name", "network":"none",
 *    "fs":[{"kind","path","optional"}...]          every rule, declaration order,
 *    "protect_dirs","protect_files","secret_prefixes","scan_skip":[names...],
 *    "env":{"keep","keep_prefix","strip","strip_prefix":[names...],
 *           "set":[[name, value]...]},
 *    "seccomp":{"deny":[[syscall, "EPERM"]...], "socket_allow":[families...],
 *               "socketpair_unix", "deny_clone_ns", "deny_tty_inject", "socket_errno"},
 *    "limits":{"timeout_ms","output_bytes","nofile","core_bytes","scan_depth",
 *              "scan_entries"}}
 * Host-specific text is written symbolically so the digest is the same on every host:
 *   - every '$' of host text is doubled ("$$"), so a literal "${home}" in a value can
 *     never collide with a rewritten root;
 *   - a clean absolute path equal to or below a root is written "${root}" + the rest,
 *     choosing the deepest matching root (workspace and scratch usually live under home
 *     or tmp); on a tie the first of workspace, scratch, home, tmp wins; a root "/" is
 *     never used (it would rewrite every path);
 *   - env `set` values are split at ':' and each element is rewritten like a path
 *     (HOME=<scratch>/home, PATH=<scratch>/bin:/usr/bin).
 * Provenance, the policy source file, the `discovered` label and the roots themselves are
 * not part of it: moving a line in a policy or running in another workspace keeps the
 * digest. Discovered rules are encoded like any other: the digest is only taken of the
 * evaluation against the neutral host, where nothing is host-derived, so whatever is in
 * that plan is a declaration, and a label a policy author sets must not hide one.
 * Text that is not valid UTF-8 is encoded as {"base16":"<hex bytes>"} instead of a string
 * (lossless, and never equal to a string). That is the digest's own encoding: the full
 * plan (a3s_plan_json), like every JSON output, writes such text as {"base64": ...}
 * (engine/json.h).
 * Errno values are written by name ("EPERM"), or as a number when the table has no name.
 * Changing any of this changes digests: bump A3S_PLAN_VERSION when you do. */
#include "plan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <nettle/sha2.h>

#include "json.h"
#include "util.h"

#define CANON_FLAGS (JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII)

/* AF_MAX on current Linux; families at or above it do not exist. */
#define A3S_AF_LIMIT 46
#define A3S_ERRNO_MAX 4095

/* ---------------------------------------------------------------- small helpers */

static const char *const kind_names[A3S_FS_KIND_COUNT] = {
    [A3S_FS_HIDE] = "hide",        [A3S_FS_TMPFS] = "tmpfs",     [A3S_FS_RO] = "read_only",
    [A3S_FS_RW] = "writable",      [A3S_FS_PROTECT] = "protect", [A3S_FS_MASK] = "mask",
};

/* How validation messages name a rule of each kind. */
static const char *const kind_labels[A3S_FS_KIND_COUNT] = {
    [A3S_FS_HIDE] = "hidden path",       [A3S_FS_TMPFS] = "tmpfs",
    [A3S_FS_RO] = "read-only path",      [A3S_FS_RW] = "writable root",
    [A3S_FS_PROTECT] = "protected path", [A3S_FS_MASK] = "masked path",
};

const char *a3s_fs_kind_name(enum a3s_fs_kind k)
{
    if ((int)k < 0 || k >= A3S_FS_KIND_COUNT)
        return "unknown";
    return kind_names[k];
}

static const char *kind_label(enum a3s_fs_kind k)
{
    if ((int)k < 0 || k >= A3S_FS_KIND_COUNT)
        return "fs rule";
    return kind_labels[k];
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

/* "file:line", "file" (line <= 0, e.g. "<scan>") or "<engine>". */
static const char *prov_str(const a3s_prov *pv, char *buf, size_t n)
{
    if (!pv->file)
        return "<engine>";
    if (pv->line > 0)
        snprintf(buf, n, "%s:%d", pv->file, pv->line);
    else
        snprintf(buf, n, "%s", pv->file);
    return buf;
}

static int oom(a3s_error *err)
{
    return a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
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
    a3s_seccomp_plan *sp = &p->seccomp;
    if (grow((void **)&sp->socket_allow, &sp->capsocket_allow, sp->nsocket_allow,
             sizeof *sp->socket_allow) < 0)
        return oom(err);
    sp->socket_allow[sp->nsocket_allow++] = family;
    return 0;
}

/* ---------------------------------------------------------------- validation */

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

int a3s_plan_validate(const a3s_plan *p, a3s_error *err)
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
    return 0;
}

/* ---------------------------------------------------------------- JSON helpers */

/* Canonical form only (the digest input, so it keeps its encoding): a JSON string for
 * arbitrary bytes, the string itself when it is valid UTF-8, else {"base16": hex}
 * (lossless; jansson only holds UTF-8). NULL text -> null. */
static json_t *jtext(const char *s)
{
    if (!s)
        return json_null();
    size_t n = strlen(s);
    if (a3s_json_is_utf8(s, n))
        return json_stringn_nocheck(s, n); /* NULL now only means ENOMEM */
    char *hex = malloc(n * 2 + 1);
    if (!hex)
        return NULL;
    for (size_t i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", (unsigned char)s[i]);
    json_t *j = json_pack("{s:s}", "base16", hex);
    free(hex);
    return j;
}

/* Checked building (engine/json.h): a failed allocation fails the whole document. */
static int oset(json_t *o, const char *k, json_t *v)
{
    return a3s_json_set(o, k, v);
}

static int apush(json_t *a, json_t *v)
{
    return a3s_json_push(a, v);
}

/* Push `v` into `a` when `ok` (v was fully built), else drop it; -1 on any failure. */
static int push_built(json_t *a, json_t *v, bool ok)
{
    if (!ok) {
        json_decref(v);
        return -1;
    }
    return apush(a, v);
}

/* Errno by name when the table has one, else the number (still unambiguous). */
static json_t *jerrno(int e)
{
    const char *n = a3s_errno_name(e);
    return n ? json_string(n) : json_integer(e);
}

/* Full plan only: provenance is host text (a policy file path). */
static json_t *jprov(const a3s_prov *pv)
{
    char pb[1024];
    return a3s_json_cstr(prov_str(pv, pb, sizeof pb));
}


/* ---------------------------------------------------------------- symbolic text */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
    if (b->failed)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* Host text with every '$' doubled, so "${...}" only ever comes from a root. */
static void sb_add_escaped(sbuf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '$')
            sb_add(b, "$$", 2);
        else
            sb_add(b, s + i, 1);
    }
}

/* Append one element (a path or any text) written symbolically. */
static void sb_add_symbolic(sbuf *b, const a3s_plan *p, const char *s, size_t n)
{
    const char *roots[4] = {p->workspace, p->scratch, p->home, p->tmp};
    static const char *const tok[4] = {"${workspace}", "${scratch}", "${home}", "${tmp}"};
    char *elem = strndup(s, n);
    if (!elem) {
        b->failed = true;
        return;
    }
    int best = -1;
    size_t bestlen = 0;
    if (a3s_path_is_clean(elem)) {
        for (int i = 0; i < 4; i++) {
            if (!roots[i] || !a3s_path_is_clean(roots[i]) || strcmp(roots[i], "/") == 0)
                continue;
            size_t rl = strlen(roots[i]);
            /* Deepest root wins; strict '>' keeps the listed order on ties. */
            if (a3s_path_within(elem, roots[i]) && (best < 0 || rl > bestlen)) {
                best = i;
                bestlen = rl;
            }
        }
    }
    if (best >= 0) {
        sb_add(b, tok[best], strlen(tok[best]));
        sb_add_escaped(b, elem + bestlen, n - bestlen);
    } else {
        sb_add_escaped(b, elem, n);
    }
    free(elem);
}

static json_t *jsymbolic_path(const a3s_plan *p, const char *path)
{
    if (!path)
        return json_null();
    sbuf b = {0};
    sb_add(&b, "", 0);
    sb_add_symbolic(&b, p, path, strlen(path));
    json_t *j = b.failed ? NULL : jtext(b.s);
    free(b.s);
    return j;
}

/* Values are ':'-separated lists (PATH-like); each element is rewritten on its own. */
static json_t *jsymbolic_value(const a3s_plan *p, const char *v)
{
    if (!v)
        return json_null();
    sbuf b = {0};
    sb_add(&b, "", 0);
    for (const char *s = v;;) {
        const char *c = strchr(s, ':');
        size_t n = c ? (size_t)(c - s) : strlen(s);
        sb_add_symbolic(&b, p, s, n);
        if (!c)
            break;
        sb_add(&b, ":", 1);
        s = c + 1;
    }
    json_t *j = b.failed ? NULL : jtext(b.s);
    free(b.s);
    return j;
}

/* ---------------------------------------------------------------- canonical form */

static json_t *canon_names(const a3s_name_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++)
        if (apush(a, jtext(l->v[i].name)) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *canon_fs(const a3s_plan *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        json_t *o = json_object();
        bool ok = oset(o, "kind", json_string(a3s_fs_kind_name(r->kind))) == 0 &&
                  oset(o, "path", jsymbolic_path(p, r->path)) == 0 &&
                  oset(o, "optional", json_boolean(r->optional)) == 0 &&
                  /* only when declared, so plans without it keep their digests */
                  (!r->broaden || oset(o, "broaden", json_true()) == 0);
        if (push_built(a, o, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *canon_env(const a3s_plan *p)
{
    const a3s_env_plan *ep = &p->env;
    json_t *o = json_object();
    json_t *set = json_array();
    if (oset(o, "keep", canon_names(&ep->keep)) < 0 ||
        oset(o, "keep_prefix", canon_names(&ep->keep_prefix)) < 0 ||
        oset(o, "strip", canon_names(&ep->strip)) < 0 ||
        oset(o, "strip_prefix", canon_names(&ep->strip_prefix)) < 0)
        goto fail;
    for (size_t i = 0; i < ep->nset; i++) {
        json_t *pair = json_array();
        bool ok = apush(pair, jtext(ep->set[i].name)) == 0 &&
                  apush(pair, jsymbolic_value(p, ep->set[i].value)) == 0;
        if (push_built(set, pair, ok) < 0)
            goto fail;
    }
    if (oset(o, "set", set) < 0) {
        set = NULL;
        goto fail;
    }
    return o;
fail:
    json_decref(set);
    json_decref(o);
    return NULL;
}

/* The seccomp section: canonical (deny rules as [syscall, errno] pairs) or full (objects
 * with the errno number and the provenance of each rule). */
static json_t *seccomp_obj(const a3s_seccomp_plan *sp, bool full)
{
    json_t *o = json_object(), *deny = json_array(), *fam = json_array();
    for (size_t i = 0; i < sp->ndeny; i++) {
        json_t *r;
        bool ok;
        if (full) {
            r = json_object();
            ok = oset(r, "syscall", a3s_json_cstr(sp->deny[i].syscall)) == 0 &&
                 oset(r, "errno", jerrno(sp->deny[i].errnum)) == 0 &&
                 oset(r, "errnum", json_integer(sp->deny[i].errnum)) == 0 &&
                 oset(r, "from", jprov(&sp->deny[i].prov)) == 0;
        } else {
            r = json_array();
            ok = apush(r, jtext(sp->deny[i].syscall)) == 0 &&
                 apush(r, jerrno(sp->deny[i].errnum)) == 0;
        }
        if (push_built(deny, r, ok) < 0)
            goto fail;
    }
    for (size_t i = 0; i < sp->nsocket_allow; i++)
        if (apush(fam, json_integer(sp->socket_allow[i])) < 0)
            goto fail;
    {
        int rc = oset(o, "deny", deny);
        deny = NULL;
        if (rc < 0)
            goto fail;
        rc = oset(o, "socket_allow", fam);
        fam = NULL;
        if (rc < 0)
            goto fail;
    }
    if (oset(o, "socketpair_unix", json_boolean(sp->socketpair_unix)) < 0 ||
        oset(o, "deny_clone_ns", json_boolean(sp->deny_clone_ns)) < 0 ||
        oset(o, "deny_tty_inject", json_boolean(sp->deny_tty_inject)) < 0 ||
        oset(o, "socket_errno", jerrno(sp->socket_errnum)) < 0 ||
        (full && oset(o, "from", jprov(&sp->prov)) < 0))
        goto fail;
    return o;
fail:
    json_decref(deny);
    json_decref(fam);
    json_decref(o);
    return NULL;
}

static json_t *limits_obj(const a3s_limits *l)
{
    json_t *o = json_object();
    if (oset(o, "timeout_ms", json_integer(l->timeout_ms)) < 0 ||
        oset(o, "output_bytes", json_integer(l->output_bytes)) < 0 ||
        oset(o, "nofile", json_integer(l->nofile)) < 0 ||
        oset(o, "core_bytes", json_integer(l->core_bytes)) < 0 ||
        oset(o, "scan_depth", json_integer(l->scan_depth)) < 0 ||
        oset(o, "scan_entries", json_integer(l->scan_entries)) < 0) {
        json_decref(o);
        return NULL;
    }
    /* Quotas only when set, so plans without them keep their digests. */
    const struct {
        const char *k;
        int64_t v;
    } q[] = {{"processes", l->processes},
             {"memory_bytes", l->memory_bytes},
             {"cpu_millicores", l->cpu_millicores},
             {"file_size_bytes", l->file_size_bytes}};
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        if (q[i].v && oset(o, q[i].k, json_integer(q[i].v)) < 0) {
            json_decref(o);
            return NULL;
        }
    return o;
}

static json_t *jnetwork(int mode)
{
    /* Unknown modes (refused by validation) still encode distinctly. */
    return mode == A3S_NET_NONE ? json_string("none") : json_integer(mode);
}

char *a3s_plan_canonical(const a3s_plan *p)
{
    if (!p)
        return NULL;
    json_t *o = json_object();
    char *out = NULL;
    if (oset(o, "a3s_plan_version", json_integer(A3S_PLAN_VERSION)) < 0 ||
        oset(o, "name", jtext(p->name)) < 0 || oset(o, "network", jnetwork(p->network)) < 0 ||
        oset(o, "fs", canon_fs(p)) < 0 ||
        oset(o, "protect_dirs", canon_names(&p->protect_dirs)) < 0 ||
        oset(o, "protect_files", canon_names(&p->protect_files)) < 0 ||
        oset(o, "secret_prefixes", canon_names(&p->secret_prefixes)) < 0 ||
        oset(o, "scan_skip", canon_names(&p->scan_skip)) < 0 ||
        oset(o, "env", canon_env(p)) < 0 || oset(o, "seccomp", seccomp_obj(&p->seccomp, false)) < 0 ||
        oset(o, "limits", limits_obj(&p->limits)) < 0 ||
        /* Only when set, so that plans without it keep their digests. */
        (p->allow_host_root && oset(o, "allow_host_root", json_true()) < 0))
        goto out;
    out = json_dumps(o, CANON_FLAGS);
out:
    json_decref(o);
    return out;
}

void a3s_sha256_hex(const void *data, size_t len, char out[65])
{
    struct sha256_ctx ctx;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, sizeof d, d);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof d; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

int a3s_plan_digest(const a3s_plan *p, char out[65], a3s_error *err)
{
    char *canon = a3s_plan_canonical(p);
    if (!canon)
        return a3s_fail(err, A3S_ERR_INTERNAL, "plan: cannot encode the canonical plan");
    a3s_sha256_hex(canon, strlen(canon), out);
    free(canon);
    return 0;
}

/* ---------------------------------------------------------------- full plan dump */

static json_t *full_names(const a3s_name_list *l)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < l->n; i++) {
        json_t *o = json_object();
        bool ok = oset(o, "name", a3s_json_cstr(l->v[i].name)) == 0 &&
                  oset(o, "from", jprov(&l->v[i].prov)) == 0;
        if (push_built(a, o, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *full_fs(const a3s_plan *p)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        json_t *o = json_object();
        bool ok = oset(o, "kind", json_string(a3s_fs_kind_name(r->kind))) == 0 &&
                  oset(o, "path", a3s_json_cstr(r->path)) == 0 &&
                  oset(o, "optional", json_boolean(r->optional)) == 0 &&
                  oset(o, "broaden", json_boolean(r->broaden)) == 0 &&
                  oset(o, "discovered", json_boolean(r->discovered)) == 0 &&
                  oset(o, "from", jprov(&r->prov)) == 0;
        if (push_built(a, o, ok) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *full_env(const a3s_env_plan *ep)
{
    json_t *o = json_object(), *set = json_array();
    if (oset(o, "keep", full_names(&ep->keep)) < 0 ||
        oset(o, "keep_prefix", full_names(&ep->keep_prefix)) < 0 ||
        oset(o, "strip", full_names(&ep->strip)) < 0 ||
        oset(o, "strip_prefix", full_names(&ep->strip_prefix)) < 0)
        goto fail;
    for (size_t i = 0; i < ep->nset; i++) {
        json_t *kv = json_object();
        bool ok = oset(kv, "name", a3s_json_cstr(ep->set[i].name)) == 0 &&
                  oset(kv, "value", a3s_json_cstr(ep->set[i].value)) == 0 &&
                  oset(kv, "discovered", json_boolean(ep->set[i].discovered)) == 0 &&
                  oset(kv, "from", jprov(&ep->set[i].prov)) == 0;
        if (push_built(set, kv, ok) < 0)
            goto fail;
    }
    {
        int rc = oset(o, "set", set);
        set = NULL;
        if (rc < 0)
            goto fail;
    }
    return o;
fail:
    json_decref(set);
    json_decref(o);
    return NULL;
}

char *a3s_plan_json(const a3s_plan *p, const char *extra_json)
{
    if (!p)
        return NULL;
    json_t *extra = NULL;
    if (extra_json) {
        /* The caller hands us its own JSON object; anything else is a bug on its side
         * and yields NULL rather than a dump silently missing those members. */
        extra = json_loads(extra_json, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(extra)) {
            json_decref(extra);
            return NULL;
        }
    }
    char digest[65];
    json_t *o = json_object(), *roots = json_object(), *limits = limits_obj(&p->limits);
    char *out = NULL;
    if (oset(roots, "workspace", a3s_json_cstr(p->workspace)) < 0 ||
        oset(roots, "scratch", a3s_json_cstr(p->scratch)) < 0 ||
        oset(roots, "home", a3s_json_cstr(p->home)) < 0 ||
        oset(roots, "tmp", a3s_json_cstr(p->tmp)) < 0 ||
        oset(limits, "from", jprov(&p->limits.prov)) < 0)
        goto out;
    if (a3s_plan_digest(p, digest, NULL) < 0)
        goto out;
    {
        int rc = oset(o, "roots", roots);
        roots = NULL;
        if (rc < 0)
            goto out;
        rc = oset(o, "limits", limits);
        limits = NULL;
        if (rc < 0)
            goto out;
    }
    if (oset(o, "a3s_plan_version", json_integer(A3S_PLAN_VERSION)) < 0 ||
        oset(o, "name", a3s_json_cstr(p->name)) < 0 ||
        oset(o, "source", a3s_json_cstr(p->source)) < 0 ||
        oset(o, "digest", json_string(digest)) < 0 ||
        oset(o, "network", jnetwork(p->network)) < 0 ||
        oset(o, "network_from", jprov(&p->network_prov)) < 0 ||
        oset(o, "allow_host_root", json_boolean(p->allow_host_root)) < 0 ||
        oset(o, "fs", full_fs(p)) < 0 ||
        oset(o, "protect_dirs", full_names(&p->protect_dirs)) < 0 ||
        oset(o, "protect_files", full_names(&p->protect_files)) < 0 ||
        oset(o, "secret_prefixes", full_names(&p->secret_prefixes)) < 0 ||
        oset(o, "scan_skip", full_names(&p->scan_skip)) < 0 ||
        oset(o, "env", full_env(&p->env)) < 0 || oset(o, "seccomp", seccomp_obj(&p->seccomp, true)) < 0)
        goto out;
    if (extra && json_object_update(o, extra) < 0)
        goto out;
    out = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
out:
    json_decref(roots);
    json_decref(limits);
    json_decref(extra);
    json_decref(o);
    return out;
}
