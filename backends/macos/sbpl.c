/* The Seatbelt profile of a frozen plan (sbpl.h). Every host string goes into the profile
 * through put_str (a quoted string: `"` and `\` escaped, every other byte as it is, which
 * is how the SBPL reader takes a string) or put_re (the same, after escaping every regex
 * metacharacter), so no name can end a string early or widen a pattern. Comments hold no
 * host text: a newline in a name would end the comment. */
#include "sbpl.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

/* One byte of a quoted string. */
static void put_strc(a3s_sbuf *b, char c)
{
    if (c == '"' || c == '\\')
        a3s_sbuf_add(b, "\\", 1);
    a3s_sbuf_add(b, &c, 1);
}

static void put_str(a3s_sbuf *b, const char *s)
{
    a3s_sbuf_add(b, "\"", 1);
    for (; *s; s++)
        put_strc(b, *s);
    a3s_sbuf_add(b, "\"", 1);
}

/* s as regex text matching exactly s (inside an open quoted string); ci: ASCII letters in
 * either case, as the scan matches names. */
static void put_re(a3s_sbuf *b, const char *s, bool ci)
{
    for (; *s; s++) {
        char c = *s;
        if (ci && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
            char cls[5] = {'[', (char)(c | 0x20), (char)(c & ~0x20), ']', '\0'};
            a3s_sbuf_adds(b, cls);
            continue;
        }
        if (strchr(".[]()*+?{}|^$\\", c))
            put_strc(b, '\\');
        put_strc(b, c);
    }
}

/* macOS reaches /tmp, /var and /etc through links to /private/...; Seatbelt matches the
 * resolved path. A deny names both spellings (an allow never gets a second one). */
static bool has_private_twin(const char *path)
{
    static const char *const linked[] = {"/tmp", "/var", "/etc"};
    for (size_t i = 0; i < sizeof linked / sizeof linked[0]; i++)
        if (a3s_path_within(path, linked[i]))
            return true;
    return false;
}

/* (ACTION OPS (subpath "P")), with the /private twin for a deny. */
static void rule(a3s_sbuf *b, const char *action, const char *ops, const char *path)
{
    a3s_sbuf_adds(b, "(");
    a3s_sbuf_adds(b, action);
    a3s_sbuf_adds(b, " ");
    a3s_sbuf_adds(b, ops);
    a3s_sbuf_adds(b, " (subpath ");
    put_str(b, path);
    if (!strcmp(action, "deny") && has_private_twin(path)) {
        a3s_sbuf_adds(b, ") (subpath ");
        char *twin = NULL;
        if (asprintf(&twin, "/private%s", path) < 0) {
            b->failed = true;
            return;
        }
        put_str(b, twin);
        free(twin);
    }
    a3s_sbuf_adds(b, "))\n");
}

static const char *prov_str(const a3s_prov *pv, char *out, size_t n)
{
    snprintf(out, n, "%s:%d", pv->file ? pv->file : "<engine>", pv->line);
    return out;
}

int a3s_sbpl_check(const a3s_plan *p, a3s_error *err)
{
    char pb[1024];
    if (p->network != A3S_NET_NONE)
        return a3s_fail(err, A3S_ERR_POLICY, "macos-seatbelt: network mode %d (%s) cannot be "
                        "expressed: only none", p->network,
                        prov_str(&p->network_prov, pb, sizeof pb));
    for (size_t i = 0; i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (r->kind == A3S_FS_RW && !a3s_path_within(r->path, p->workspace) &&
            !(p->scratch && a3s_path_within(r->path, p->scratch)))
            return a3s_fail(err, A3S_ERR_POLICY, "macos-seatbelt: writable root '%s' (%s) lies "
                            "outside the workspace and the scratch dir: refused (this backend "
                            "writes only there)", r->path, prov_str(&r->prov, pb, sizeof pb));
    }
    return 0;
}

/* A filesystem rule or a protected name, ordered by depth (then as given). */
typedef struct entry {
    int depth;
    size_t seq;
    const a3s_fs_rule *r; /* NULL: the protected name `name` */
    const char *name;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return (x->seq > y->seq) - (x->seq < y->seq);
}

static void fs_rule(a3s_sbuf *b, const a3s_fs_rule *r)
{
    switch (r->kind) {
    case A3S_FS_HIDE:
    case A3S_FS_TMPFS: /* a private /tmp does not exist here: hidden (TMPDIR is scratch) */
        rule(b, "deny", "file-read* file-write*", r->path);
        break;
    case A3S_FS_RO:
        rule(b, "allow", "file-read*", r->path);
        rule(b, "deny", "file-write*", r->path);
        break;
    case A3S_FS_RW:
        rule(b, "allow", "file-read* file-write*", r->path);
        break;
    case A3S_FS_PROTECT:
        rule(b, "deny", "file-write*", r->path);
        break;
    default: /* masks: after everything (mask_rules) */
        break;
    }
}

/* Every case spelling of a protected top-level name, and everything below it: a missing
 * one cannot be created either (what the Linux backend's pins do). */
static void name_rule(a3s_sbuf *b, const char *ws, const char *name)
{
    a3s_sbuf_adds(b, "(deny file-write* (regex \"^");
    put_re(b, ws, false);
    a3s_sbuf_adds(b, "/");
    put_re(b, name, true);
    a3s_sbuf_adds(b, "(/|$)\"))\n");
}

static bool name_seen(const char *const *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcasecmp(v[i], name))
            return true;
    return false;
}

/* The protected names: the plan's, and those the scan found missing (the running
 * program's entry among them), once each. */
static int collect_names(const a3s_sbpl_input *in, const char ***out, size_t *n)
{
    const a3s_plan *p = in->plan;
    const a3s_strv empty = {0};
    const a3s_strv *md = in->scan ? &in->scan->missing_dirs : &empty;
    const a3s_strv *mf = in->scan ? &in->scan->missing_files : &empty;
    size_t cap = p->protect_dirs.n + p->protect_files.n + md->n + mf->n;
    const char **v = calloc(cap ? cap : 1, sizeof *v);
    if (!v)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < p->protect_dirs.n; i++)
        if (!name_seen(v, k, p->protect_dirs.v[i].name))
            v[k++] = p->protect_dirs.v[i].name;
    for (size_t i = 0; i < p->protect_files.n; i++)
        if (!name_seen(v, k, p->protect_files.v[i].name))
            v[k++] = p->protect_files.v[i].name;
    for (size_t i = 0; i < md->n; i++)
        if (!name_seen(v, k, md->v[i]))
            v[k++] = md->v[i];
    for (size_t i = 0; i < mf->n; i++)
        if (!name_seen(v, k, mf->v[i]))
            v[k++] = mf->v[i];
    *out = v;
    *n = k;
    return 0;
}

/* The plan's rules and the protected names (one level below the workspace), shallowest
 * first. */
static int fs_rules(a3s_sbuf *b, const a3s_sbpl_input *in)
{
    const a3s_plan *p = in->plan;
    size_t nscan = in->scan ? in->scan->nrules : 0;
    const char **names = NULL;
    size_t nnames = 0;
    if (collect_names(in, &names, &nnames) < 0)
        return -1;
    entry *e = calloc(p->nfs + nscan + nnames + 1, sizeof *e);
    if (!e) {
        free(names);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < p->nfs; i++, k++)
        e[k] = (entry){a3s_path_depth(p->fs[i].path), k, &p->fs[i], NULL};
    for (size_t i = 0; i < nscan; i++, k++)
        e[k] = (entry){a3s_path_depth(in->scan->rules[i].path), k, &in->scan->rules[i], NULL};
    for (size_t i = 0; i < nnames; i++, k++)
        e[k] = (entry){a3s_path_depth(in->workspace) + 1, k, NULL, names[i]};
    qsort(e, k, sizeof *e, cmp_entry);
    for (size_t i = 0; i < k; i++) {
        if (e[i].r)
            fs_rule(b, e[i].r);
        else
            name_rule(b, in->workspace, e[i].name);
    }
    free(e);
    free(names);
    return 0;
}

/* Secrets: every entry of the workspace whose name starts with a secret prefix (any
 * case, at any depth, created during the run too), then the plan's and the scan's
 * masks. */
static void mask_rules(a3s_sbuf *b, const a3s_sbpl_input *in)
{
    const a3s_plan *p = in->plan;
    for (size_t i = 0; i < p->secret_prefixes.n; i++) {
        a3s_sbuf_adds(b, "(deny file-read* file-write* (regex \"^");
        put_re(b, in->workspace, false);
        a3s_sbuf_adds(b, "/(.*/)?");
        put_re(b, p->secret_prefixes.v[i].name, true);
        a3s_sbuf_adds(b, "[^/]*(/|$)\"))\n");
    }
    for (size_t i = 0; i < p->nfs; i++)
        if (p->fs[i].kind == A3S_FS_MASK)
            rule(b, "deny", "file-read* file-write*", p->fs[i].path);
    for (size_t i = 0; in->scan && i < in->scan->nrules; i++)
        if (in->scan->rules[i].kind == A3S_FS_MASK)
            rule(b, "deny", "file-read* file-write*", in->scan->rules[i].path);
}

int a3s_sbpl_profile(const a3s_sbpl_input *in, char **out, a3s_error *err)
{
    *out = NULL;
    if (a3s_sbpl_check(in->plan, err) < 0)
        return -1;
    a3s_sbuf b = {0};
    a3s_sbuf_adds(&b, "(version 1)\n"
            "; Generated by a3s-sandbox from a frozen plan (backends/macos/README.md).\n"
            "; In SBPL the last matching rule wins: every deny below follows the allows it\n"
            "; narrows.\n"
            "(deny default)\n"
            "; The command and its children.\n"
            "(allow process-fork)\n"
            "(allow process-exec)\n"
            "(allow signal (target same-sandbox))\n"
            "; What programs read of the host at start; nothing of it is written.\n"
            "(allow sysctl-read)\n"
            "(allow mach-lookup (global-name \"com.apple.system.opendirectoryd.libinfo\")\n"
            "  (global-name \"com.apple.system.notification_center\"))\n"
            "; The host root, read-only (the first rule of every plan).\n"
            "(allow file-read* (subpath \"/\"))\n"
            "; Data sinks.\n"
            "(allow file-write-data (literal \"/dev/null\") (literal \"/dev/zero\"))\n"
            "; The plan's rules, shallowest path first, and the protected names.\n");
    int rc = fs_rules(&b, in);
    a3s_sbuf_adds(&b, "; Secrets and masks, after everything: nothing above re-exposes them.\n");
    mask_rules(&b, in);
    a3s_sbuf_adds(&b, "; No network of any kind, Unix sockets included.\n"
            "(deny network*)\n");
    if (rc < 0 || b.failed) {
        free(b.s);
        return a3s_fail(err, A3S_ERR_INTERNAL, "macos-seatbelt: out of memory");
    }
    *out = b.s;
    return 0;
}
