/* The workspace scan's rules: which entry gets which rule. Protected names in every case
 * spelling at top level, secret prefixes anywhere, hard links, package stores recorded
 * for later, and the aliases of credential inodes in them (see scan.c for the walk). */
#include "scan_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---------------------------------------------------------------- names */

/* ASCII case folding only: names are bytes, and the locale must not change matching. */
static int fold(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

static bool name_eq(const char *a, const char *b)
{
    for (; *a && fold((unsigned char)*a) == fold((unsigned char)*b); a++, b++)
        ;
    return fold((unsigned char)*a) == fold((unsigned char)*b);
}

static bool name_has_prefix(const char *s, const char *prefix)
{
    for (; *prefix; s++, prefix++)
        if (!*s || fold((unsigned char)*s) != fold((unsigned char)*prefix))
            return false;
    return true;
}

static bool list_has(const a3s_name_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_eq(name, l->v[i].name))
            return true;
    return false;
}

static bool list_has_prefix_of(const a3s_name_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (name_has_prefix(name, l->v[i].name))
            return true;
    return false;
}

/* One path component: an empty secret prefix would match everything, a '/' nothing. */
int a3s_scan_check_names(const a3s_name_list *l, const char *what, a3s_error *err)
{
    for (size_t i = 0; i < l->n; i++) {
        const char *n = l->v[i].name;
        if (!n || !n[0] || strchr(n, '/') || strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "workspace scan: %s entry '%s' must be one non-empty path component",
                            what, n ? n : "(null)");
    }
    return 0;
}

static bool strv_has(const a3s_strv *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

/* Package-store pass: every regular file aliasing a credential inode is masked. */
static int visit_store_entry(struct scan *s, int dfd, const char *name, unsigned char type,
                             int64_t depth, unsigned flags)
{
    struct stat st;
    if (type == DT_DIR)
        return a3s_scan_descend(s, dfd, name, depth, flags);
    if (type != DT_REG)
        return 0;
    int r = a3s_scan_entry_stat(s, dfd, name, &st);
    if (r <= 0)
        return r;
    if (S_ISREG(st.st_mode) && st.st_nlink > 1 && a3s_scan_wanted_has(s, &st))
        return a3s_scan_add_mask(s, &st, depth);
    return 0;
}

/* Whether the plan masks the entry being visited (below: an entry below it). */
static bool policy_masks(const struct scan *s, bool below)
{
    for (size_t i = 0; i < s->p->nfs; i++) {
        const char *m = s->p->fs[i].path;
        if (s->p->fs[i].kind != A3S_FS_MASK)
            continue;
        if (below ? strncmp(m, s->path, s->len) == 0 && m[s->len] == '/' : !strcmp(m, s->path))
            return true;
    }
    return false;
}

int a3s_scan_visit_entry(struct scan *s, int dfd, const char *name, unsigned char type,
                         int64_t depth, unsigned flags)
{
    struct stat st;
    bool have_st = false;
    int r;

    if (depth > s->max_depth)
        return a3s_fail(s->err, A3S_ERR_POLICY,
                        "workspace scan depth limit %" PRId64 " exceeded at %s", s->max_depth,
                        s->path);
    if (type == DT_UNKNOWN) {
        if ((r = a3s_scan_entry_stat(s, dfd, name, &st)) <= 0)
            return r;
        have_st = true;
        type = IFTODT(st.st_mode);
    }
    /* A mask of the policy's own below the workspace (a credential an environment
     * variable places there): held like a secret the scan finds, so that no command can
     * move it where the next run's mask, which names its path, would not reach. */
    if (depth > 1 && s->deep_masks && !(flags & IN_MASKED) && policy_masks(s, false) &&
        a3s_scan_hold_ancestors(s, depth) < 0)
        return -1;
    if (flags & IN_STORE)
        return visit_store_entry(s, dfd, name, type, depth, flags);

    if (list_has_prefix_of(&s->p->secret_prefixes, name)) {
        /* A symlink here would let the mask land on its target: refuse (fail closed). */
        if (type == DT_LNK)
            return a3s_fail(s->err, A3S_ERR_POLICY,
                            "refusing a symbolic link at secret workspace path %s", s->path);
        if (!have_st && (r = a3s_scan_entry_stat(s, dfd, name, &st)) <= 0)
            return r;
        if (!(flags & IN_MASKED) && a3s_scan_add_mask(s, &st, depth) < 0)
            return -1;
        if (type == DT_REG) {
            if (S_ISREG(st.st_mode) && st.st_nlink > 1)
                return a3s_scan_add_wanted(s, &st);
            return 0;
        }
        /* Walked for the credential inodes inside; its contents need no rules. */
        if (type == DT_DIR)
            return a3s_scan_descend(s, dfd, name, depth, flags | IN_MASKED);
        return 0;
    }

    if (depth > 1 && name_eq(name, ".git") && !(flags & (IN_MASKED | IN_GITDIR)) &&
        (type == DT_DIR || type == DT_REG || type == DT_LNK))
        return a3s_scan_nested_git(s, dfd, name, type, depth);

    if (type == DT_DIR) {
        /* A store that holds a mask of the policy's own is walked like any directory:
         * the mask's ancestors in it must be held (above). */
        if (list_has(&s->p->scan_skip, name) && !(s->deep_masks && policy_masks(s, true))) {
            /* Package stores are searched later, only if a credential has aliases. */
            if (!name_eq(name, ".git") && !(flags & IN_MASKED) &&
                a3s_strv_push(&s->stores, a3s_scan_rel_path(s)) < 0)
                return a3s_scan_oom(s);
            return 0;
        }
        /* A gitdir target is a git directory like .git: protected, and walked for
         * secrets only (whatever a .git file names must not hide them). */
        if (strv_has(&s->gitdirs, a3s_scan_rel_path(s)))
            return a3s_scan_descend(s, dfd, name, depth, flags | IN_PROTECTED | IN_GITDIR);
        return a3s_scan_descend(s, dfd, name, depth, flags);
    }

    /* Hard-link aliases of source files, also in protected dirs (read-only is not
     * unreadable); git directories link their objects, so not there. */
    if (type == DT_REG && !(flags & IN_GITDIR)) {
        if (!have_st && (r = a3s_scan_entry_stat(s, dfd, name, &st)) <= 0)
            return r;
        if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
            if (!(flags & IN_MASKED) && a3s_scan_add_mask(s, &st, depth) < 0)
                return -1;
            return a3s_scan_add_wanted(s, &st);
        }
    }
    return 0;
}

/* The protected top-level names: the plan's, then those the caller adds (hooks->also_*,
 * the program's own image); dir says which list a missing one is pinned in. */
typedef struct pname {
    const char *name;
    bool dir;
} pname;

static size_t strv0_len(const char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

static pname *protected_names(const struct scan *s, size_t *np)
{
    const a3s_name_list *pd = &s->p->protect_dirs, *pf = &s->p->protect_files;
    const char *const *ad = s->hooks ? s->hooks->also_dirs : NULL;
    const char *const *af = s->hooks ? s->hooks->also_files : NULL;
    size_t nad = strv0_len(ad), naf = strv0_len(af), n = 0;
    pname *v = calloc(pd->n + pf->n + nad + naf + 1, sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < pd->n; i++)
        v[n++] = (pname){pd->v[i].name, true};
    for (size_t i = 0; i < pf->n; i++)
        v[n++] = (pname){pf->v[i].name, false};
    for (size_t i = 0; i < nad; i++)
        v[n++] = (pname){ad[i], true};
    for (size_t i = 0; i < naf; i++)
        v[n++] = (pname){af[i], false};
    *np = n;
    return v;
}

/* Protected top-level names: PROTECT what exists, report what must be pinned. */
int a3s_scan_protected(struct scan *s, struct top_entry *tops, size_t ntops,
                       a3s_scan_result *out)
{
    size_t nseen = 0;
    pname *names = protected_names(s, &nseen);
    bool *seen = names ? calloc(nseen ? nseen : 1, sizeof *seen) : NULL;
    if (!seen) {
        free(names);
        return a3s_scan_oom(s);
    }
    int rc = 0;
    for (size_t i = 0; i < ntops && rc == 0; i++) {
        struct top_entry *t = &tops[i];
        bool match = false;
        for (size_t j = 0; j < nseen; j++)
            if (name_eq(t->name, names[j].name))
                match = true;
        if (!match)
            continue;
        size_t saved;
        if (a3s_scan_path_push(s, t->name, &saved) < 0) {
            rc = -1;
            break;
        }
        struct stat st;
        int r = a3s_scan_entry_stat(s, s->wsfd, t->name, &st);
        if (r > 0)
            t->type = IFTODT(st.st_mode);
        if (r < 0) {
            rc = -1;
        } else if (r == 0) {
            t->type = DT_UNKNOWN; /* vanished: the walk will skip it too */
        } else if (t->type == DT_LNK) {
            rc = a3s_fail(s->err, A3S_ERR_POLICY,
                          "refusing a symbolic link at protected workspace path %s", s->path);
        } else if ((s->hooks && s->hooks->held && s->hooks->held(s->hooks->ud, s->wsfd, t->name)) ||
                   (fstatat(s->wsfd, t->name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)) {
            /* A recorded placeholder (of any process): share it, or take it over from a
             * dead holder (see pin.h); or one that its last holder removed since
             * read_top saw it (the held hook waited for that): missing, to be pinned.
             * Never bind it as if it were ordinary content that will still be there. */
            t->protected = true;
            a3s_strv *l = t->type == DT_DIR ? &out->missing_dirs : &out->missing_files;
            if (!strv_has(l, t->name) && a3s_strv_push(l, t->name) < 0)
                rc = a3s_scan_oom(s);
        } else {
            /* A case variant is protected too, but only the canonical spelling itself
             * counts as present: a missing canonical name is pinned whatever variants
             * exist, so that no earlier run's ".GIT" leaves ".git" creatable. */
            t->protected = true;
            for (size_t j = 0; j < nseen; j++)
                if (!strcmp(t->name, names[j].name))
                    seen[j] = true;
            rc = a3s_scan_add_rule(s, A3S_FS_PROTECT, &st);
            /* Host git reads ".git" only; a variant counts where the directory folds
             * case (it then is the same entry as ".git"). */
            struct stat cg;
            if (rc == 0 && t->type == DT_REG && name_eq(t->name, ".git") &&
                (!strcmp(t->name, ".git") ||
                 (fstatat(s->wsfd, ".git", &cg, AT_SYMLINK_NOFOLLOW) == 0 &&
                  cg.st_ino == st.st_ino && cg.st_dev == st.st_dev)))
                rc = a3s_scan_read_gitdir(s, s->wsfd, t->name, s->base);
        }
        a3s_scan_path_pop(s, saved);
    }
    for (size_t j = 0; j < nseen && rc == 0; j++) {
        if (seen[j])
            continue;
        a3s_strv *l = names[j].dir ? &out->missing_dirs : &out->missing_files;
        if (!strv_has(l, names[j].name) && a3s_strv_push(l, names[j].name) < 0)
            rc = a3s_scan_oom(s);
    }
    free(seen);
    free(names);
    return rc;
}
