/* An evaluation's facts and their replay (facts.h). */
#include "facts.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aliases.h"
#include "runtime.h"
#include "wspath.h"

typedef struct fact {
    char kind;
    bool has;
    char *arg, *ans;
    size_t alen, nlen;
} fact;

struct a3s_policy_facts {
    fact *v;
    size_t n, cap;
    bool broken; /* out of memory while recording: never holds */
};

void a3s_facts_break(a3s_policy_facts *f)
{
    if (f)
        f->broken = true;
}

a3s_policy_facts *a3s_facts_new(void)
{
    return calloc(1, sizeof(a3s_policy_facts));
}

void a3s_facts_free(a3s_policy_facts *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++) {
        free(f->v[i].arg);
        free(f->v[i].ans);
    }
    free(f->v);
    free(f);
}

static char *dup_bytes(const char *p, size_t n)
{
    char *c = malloc(n + 1);
    if (c) {
        if (n)
            memcpy(c, p, n);
        c[n] = '\0';
    }
    return c;
}

static bool same(const fact *x, bool has, const char *ans, size_t nlen)
{
    return x->has == has && (!has || (x->nlen == nlen && (!nlen || !memcmp(x->ans, ans, nlen))));
}

void a3s_facts_add(a3s_policy_facts *f, char kind, const char *arg, size_t alen,
                   const char *ans, size_t nlen, bool has)
{
    if (!f || f->broken)
        return;
    /* A query asked again with the same answer adds nothing to check (the baseline asks
     * some a few times): each fact is checked before every command of a session. */
    for (size_t i = 0; i < f->n; i++) {
        const fact *y = &f->v[i];
        if (y->kind == kind && y->alen == alen && !memcmp(y->arg, arg, alen) &&
            same(y, has, ans, has ? nlen : 0))
            return;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        fact *v = realloc(f->v, cap * sizeof *v);
        if (!v) {
            f->broken = true;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    fact x = {.kind = kind, .has = has, .alen = alen, .nlen = has ? nlen : 0};
    x.arg = dup_bytes(arg, alen);
    x.ans = has && ans ? dup_bytes(ans, nlen) : NULL;
    if (!x.arg || (has && ans && !x.ans)) {
        free(x.arg);
        free(x.ans);
        f->broken = true;
        return;
    }
    f->v[f->n++] = x;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int a3s_facts_glob(const char *dir, const char *prefix, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -1;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -1;
    }
    size_t plen = strlen(prefix), n = 0, cap = 0;
    char **names = NULL;
    int rc = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            rc = errno ? -1 : 0;
            break;
        }
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
            strncmp(de->d_name, prefix, plen) != 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nv = realloc(names, cap * sizeof *nv);
            if (!nv) {
                rc = -1;
                break;
            }
            names = nv;
        }
        if (!(names[n] = strdup(de->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc == 0 && n) {
        qsort(names, n, sizeof *names, cmp_cstr);
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += strlen(names[i]) + 1;
        if (!(*out = malloc(total)))
            rc = -1;
        for (size_t i = 0, at = 0; rc == 0 && i < n; i++) {
            size_t l = strlen(names[i]) + 1;
            memcpy(*out + at, names[i], l);
            at += l;
        }
        *len = total;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (rc < 0) {
        free(*out);
        *out = NULL;
        *len = 0;
    }
    return rc;
}

/* path with "//", "." and ".." taken away by spelling alone (no lookup), into out. */
static void lexical(const char *path, char *out, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (const char *p = path; *p;) {
        while (*p == '/')
            p++;
        size_t l = strcspn(p, "/");
        if (l == 0)
            break;
        if (l == 2 && p[0] == '.' && p[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else if (!(l == 1 && p[0] == '.') && o + 1 + l < n) {
            out[o++] = '/';
            memcpy(out + o, p, l);
            o += l;
        }
        out[o] = '\0';
        p += l;
    }
    if (o == 0 && n > 1)
        snprintf(out, n, "/");
}

/* A PATH entry counts only when it names its directory without a symbolic link on the
 * way: a link can be planted by a command wherever commands write (an entry inside a
 * workspace, such as a virtualenv's bin), and a later run, in any workspace, would then
 * expose whatever the link points at (the baseline re-exposes the PATH directories). */
bool a3s_facts_pathdir(const char *seg, size_t len, char *canon, size_t n)
{
    char s[PATH_MAX], lex[PATH_MAX];
    struct stat st;
    if (len == 0 || len >= sizeof s || seg[0] != '/' || n < PATH_MAX)
        return false;
    memcpy(s, seg, len);
    s[len] = '\0';
    if (!realpath(s, canon) || stat(canon, &st) < 0 || !S_ISDIR(st.st_mode))
        return false;
    lexical(s, lex, sizeof lex);
    return strcmp(lex, canon) == 0;
}

bool a3s_facts_exposable(const char *path, char *canon, size_t n)
{
    char *c;
    int fd;
    a3s_error e;
    if (n < PATH_MAX || path[0] != '/' || a3s_wspath_open(path, &c, &fd, &e) < 0)
        return false;
    close(fd);
    bool ok = strlen(c) < n;
    if (ok)
        memcpy(canon, c, strlen(c) + 1);
    free(c);
    return ok;
}

/* The directories the glob facts of one check list: each read once, all its names
 * (a3s_facts_glob with no prefix: sorted), each fact's own filtered from them, which is
 * what a listing with its prefix gives (a sorted list filtered stays sorted). */
#define LISTINGS 4
typedef struct listings {
    struct {
        const char *dir;
        char *names; /* NUL-ended, sorted; NULL: none */
        size_t len;
        bool failed;
    } v[LISTINGS];
    size_t n;
} listings;

static int glob_listed(listings *ls, const char *dir, const char *prefix, char **out,
                       size_t *len)
{
    size_t i = 0;
    while (i < ls->n && strcmp(ls->v[i].dir, dir) != 0)
        i++;
    if (i == ls->n) {
        if (ls->n == LISTINGS)
            return a3s_facts_glob(dir, prefix, out, len); /* not kept: read again */
        ls->v[i].dir = dir;
        ls->v[i].failed = a3s_facts_glob(dir, "", &ls->v[i].names, &ls->v[i].len) < 0;
        ls->n++;
    }
    *out = NULL;
    *len = 0;
    if (ls->v[i].failed)
        return -1;
    size_t plen = strlen(prefix), total = 0;
    const char *all = ls->v[i].names, *end = all + ls->v[i].len;
    for (const char *p = all; p && p < end; p += strlen(p) + 1)
        if (!strncmp(p, prefix, plen))
            total += strlen(p) + 1;
    if (total == 0)
        return 0;
    if (!(*out = malloc(total)))
        return -1;
    for (const char *p = all; p < end; p += strlen(p) + 1)
        if (!strncmp(p, prefix, plen)) {
            memcpy(*out + *len, p, strlen(p) + 1);
            *len += strlen(p) + 1;
        }
    return 0;
}

/* mounts: the mount table, read at the first alias fact of a check (*mounts NULL until
 * then; left NULL when it cannot be read, and the fact does not hold). */
static bool holds(const fact *x, const a3s_policy_ctx *ctx, a3s_mount_table **mounts,
                  listings *ls)
{
    struct stat st;
    char buf[PATH_MAX];
    switch (x->kind) {
    case A3S_FACT_EXISTS:
        return x->has == (lstat(x->arg, &st) == 0);
    case A3S_FACT_IS_DIR:
        return x->has == (lstat(x->arg, &st) == 0 && S_ISDIR(st.st_mode));
    case A3S_FACT_REALPATH: {
        bool has = realpath(x->arg, buf) != NULL;
        return same(x, has, buf, has ? strlen(buf) : 0);
    }
    case A3S_FACT_PASSES:
        return x->has == (a3s_wspath_passes_within(x->arg, x->arg + strlen(x->arg) + 1) == 1);
    case A3S_FACT_MOUNT_TABLE: {
        char hex[17];
        if (!*mounts && !(*mounts = a3s_aliases_table(NULL)))
            return false;
        a3s_aliases_table_digest(*mounts, hex);
        return same(x, true, hex, 16);
    }
    case A3S_FACT_ALIASES:
    case A3S_FACT_MOUNTS_BELOW: {
        char *out;
        size_t len;
        if (!*mounts && !(*mounts = a3s_aliases_table(NULL)))
            return false;
        if ((x->kind == A3S_FACT_ALIASES ? a3s_aliases_in : a3s_aliases_below)(
                *mounts, x->arg, &out, &len) < 0)
            return false;
        bool ok = same(x, true, out ? out : "", len);
        free(out);
        return ok;
    }
    case A3S_FACT_EXPOSABLE: {
        bool has = a3s_facts_exposable(x->arg, buf, sizeof buf);
        return same(x, has, buf, has ? strlen(buf) : 0);
    }
    case A3S_FACT_PATHDIR: {
        bool has = a3s_facts_pathdir(x->arg, x->alen, buf, sizeof buf);
        return same(x, has, buf, has ? strlen(buf) : 0);
    }
    case A3S_FACT_GLOB: {
        char *out;
        size_t len;
        const char *prefix = x->arg + strlen(x->arg) + 1;
        if (glob_listed(ls, x->arg, prefix, &out, &len) < 0)
            return false;
        bool ok = same(x, true, out ? out : "", len);
        free(out);
        return ok;
    }
    case A3S_FACT_FILE: {
        char *text;
        size_t len;
        a3s_error e;
        int rc = a3s_lua_state_read_file(x->arg, ctx->guard, &text, &len, &e);
        if (rc < 0)
            return false;
        bool ok = same(x, rc == 0, text, len);
        free(text);
        return ok;
    }
    default:
        return false;
    }
}

int a3s_facts_check(const a3s_policy_facts *f, const a3s_policy_ctx *ctx)
{
    if (!f || f->broken)
        return A3S_FACTS_POLICY; /* nothing known: as if all changed */
    int rc = A3S_FACTS_HOLD;
    a3s_mount_table *mounts = NULL;
    listings ls = {.n = 0};
    for (size_t i = 0; i < f->n && rc != A3S_FACTS_POLICY; i++)
        if (!holds(&f->v[i], ctx, &mounts, &ls)) {
            char k = f->v[i].kind;
            if (k == A3S_FACT_FILE)
                rc = A3S_FACTS_POLICY;
            else if (k == A3S_FACT_ALIASES || k == A3S_FACT_MOUNTS_BELOW ||
                     k == A3S_FACT_MOUNT_TABLE)
                rc = A3S_FACTS_MOUNTS;
            else if (rc == A3S_FACTS_HOLD)
                rc = A3S_FACTS_HOST;
        }
    for (size_t i = 0; i < ls.n; i++)
        free(ls.v[i].names);
    a3s_aliases_table_free(mounts);
    return rc;
}

/* The record as bytes: "A3SF1\n", then per fact kind, has (one byte each), the lengths
 * of arg and ans (4 bytes each, little-endian) and their bytes. */
#define FACTS_MAGIC "A3SF1\n"
#define FACTS_MAX_LEN (64u << 20) /* a decoded record is never larger than what was read */

static void put32(unsigned char *p, size_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static size_t get32(const unsigned char *p)
{
    return (size_t)p[0] | (size_t)p[1] << 8 | (size_t)p[2] << 16 | (size_t)p[3] << 24;
}

int a3s_facts_encode(const a3s_policy_facts *f, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (!f || f->broken)
        return -1;
    size_t total = sizeof FACTS_MAGIC - 1;
    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i].alen > FACTS_MAX_LEN || f->v[i].nlen > FACTS_MAX_LEN)
            return -1;
        total += 10 + f->v[i].alen + f->v[i].nlen;
        if (total > FACTS_MAX_LEN)
            return -1;
    }
    unsigned char *b = malloc(total), *p = b;
    if (!b)
        return -1;
    memcpy(p, FACTS_MAGIC, sizeof FACTS_MAGIC - 1);
    p += sizeof FACTS_MAGIC - 1;
    for (size_t i = 0; i < f->n; i++) {
        const fact *x = &f->v[i];
        *p++ = (unsigned char)x->kind;
        *p++ = x->has;
        put32(p, x->alen);
        put32(p + 4, x->nlen);
        p += 8;
        if (x->alen)
            memcpy(p, x->arg, x->alen);
        p += x->alen;
        if (x->nlen)
            memcpy(p, x->ans, x->nlen);
        p += x->nlen;
    }
    *out = (char *)b;
    *len = total;
    return 0;
}

a3s_policy_facts *a3s_facts_decode(const char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)buf, *end = p + len;
    size_t m = sizeof FACTS_MAGIC - 1;
    if (!buf || len < m || len > FACTS_MAX_LEN || memcmp(p, FACTS_MAGIC, m) != 0)
        return NULL;
    p += m;
    a3s_policy_facts *f = a3s_facts_new();
    if (!f)
        return NULL;
    while (p < end) {
        if ((size_t)(end - p) < 10)
            goto bad;
        char kind = (char)p[0];
        unsigned has = p[1];
        size_t alen = get32(p + 2), nlen = get32(p + 6);
        p += 10;
        if (has > 1 || (!has && nlen) || alen > (size_t)(end - p) ||
            nlen > (size_t)(end - p) - alen)
            goto bad;
        switch (kind) {
        case A3S_FACT_EXISTS: case A3S_FACT_IS_DIR: case A3S_FACT_REALPATH:
        case A3S_FACT_GLOB: case A3S_FACT_PATHDIR: case A3S_FACT_FILE: case A3S_FACT_EXPOSABLE:
        case A3S_FACT_PASSES:
        case A3S_FACT_ALIASES:
        case A3S_FACT_MOUNTS_BELOW:
        case A3S_FACT_MOUNT_TABLE:
            break;
        default:
            goto bad;
        }
        /* Paths are C strings (a glob's is "dir NUL prefix", a passes "path NUL root"): one
         * NUL at most, and only in those two. */
        bool pair = kind == A3S_FACT_GLOB || kind == A3S_FACT_PASSES;
        const void *nul = memchr(p, '\0', alen);
        if (nul && (!pair || memchr((const char *)nul + 1, '\0',
                                    alen - ((const unsigned char *)nul - p) - 1)))
            goto bad;
        if (pair && !nul)
            goto bad;
        a3s_facts_add(f, kind, (const char *)p, alen, (const char *)p + alen, nlen, has);
        if (f->broken)
            goto bad;
        p += alen + nlen;
    }
    return f;
bad:
    a3s_facts_free(f);
    return NULL;
}
