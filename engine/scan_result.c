/* The workspace scan's result: the rules the plan does not cover, the identities and the
 * directories to hold (sorted by path, one per path), the lookup and the freeing. */
#include "scan_int.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_PROV "<scan>"

/* ---------------------------------------------------------------- results */

static int cmp_found(const void *a, const void *b)
{
    const struct found *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    /* MASK first within a path, so the merge below keeps it. */
    return (x->kind != A3S_FS_MASK) - (y->kind != A3S_FS_MASK);
}

/* Is the plan's declared rule for this path already at least as strict? */
static bool plan_covers(const a3s_plan *p, size_t nfs, const struct found *f)
{
    for (size_t i = 0; i < nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (strcmp(r->path, f->path) != 0)
            continue;
        if (r->kind == A3S_FS_MASK || r->kind == A3S_FS_HIDE)
            return true;
        if (f->kind == A3S_FS_PROTECT && (r->kind == A3S_FS_PROTECT || r->kind == A3S_FS_RO))
            return true;
    }
    return false;
}

/* The rules the plan does not already cover, one per path, into the result: the plan
 * itself is frozen (plan.h), and the backend applies these with it. */
int a3s_scan_commit_rules(struct scan *s, a3s_scan_result *out)
{
    const a3s_plan *p = s->p;
    if (s->nrules)
        qsort(s->rules, s->nrules, sizeof *s->rules, cmp_found);
    a3s_fs_rule *v = calloc(s->nrules ? s->nrules : 1, sizeof *v);
    if (!v)
        return a3s_scan_oom(s);
    size_t n = 0;
    for (size_t i = 0; i < s->nrules; i++) {
        if (i > 0 && strcmp(s->rules[i].path, s->rules[i - 1].path) == 0)
            continue;
        if (plan_covers(p, p->nfs, &s->rules[i]))
            continue;
        a3s_fs_rule r = {.kind = s->rules[i].kind, .optional = true, .discovered = true};
        if (!(r.path = strdup(s->rules[i].path)) || !(r.prov.file = strdup(SCAN_PROV))) {
            free(r.path);
            out->rules = v;
            out->nrules = n;
            return a3s_scan_oom(s);
        }
        v[n++] = r;
    }
    out->rules = v;
    out->nrules = n;
    return 0;
}

/* Hand the identities over to the result: one per path (the MASK one wins, as in the
 * plan), sorted by path for a3s_scan_find. */
int a3s_scan_export_ids(struct scan *s, struct found *v, size_t n, a3s_scan_id **out,
                        size_t *nout)
{
    *out = NULL;
    *nout = 0;
    if (n)
        qsort(v, n, sizeof *v, cmp_found);
    a3s_scan_id *ids = calloc(n ? n : 1, sizeof *ids);
    if (!ids)
        return a3s_scan_oom(s);
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        if (w > 0 && strcmp(v[i].path, ids[w - 1].path) == 0)
            continue;
        ids[w++] = (a3s_scan_id){v[i].path, v[i].dev, v[i].ino, v[i].dir};
        v[i].path = NULL; /* moved */
    }
    *out = ids;
    *nout = w;
    return 0;
}

static int cmp_id_path(const void *key, const void *elem)
{
    return strcmp(key, ((const a3s_scan_id *)elem)->path);
}

const a3s_scan_id *a3s_scan_find(const a3s_scan_result *r, const char *path)
{
    if (!r || !r->nids)
        return NULL;
    return bsearch(path, r->ids, r->nids, sizeof *r->ids, cmp_id_path);
}

static void ids_free(a3s_scan_id *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].path);
    free(v);
}

void a3s_scan_result_free(a3s_scan_result *r)
{
    if (!r)
        return;
    a3s_strv_free(&r->missing_dirs);
    a3s_strv_free(&r->missing_files);
    ids_free(r->ids, r->nids);
    ids_free(r->holds, r->nholds);
    for (size_t i = 0; i < r->nrules; i++) {
        free(r->rules[i].path);
        free(r->rules[i].prov.file);
    }
    free(r->rules);
    r->rules = NULL;
    r->nrules = 0;
    r->ids = r->holds = NULL;
    r->nids = r->nholds = 0;
    r->entries = 0;
}
