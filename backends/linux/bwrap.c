#include "bwrap.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "wspath.h"

int a3s_bwrap_resolve_exe(const char *path, const char *workspace, const char *what,
                          char **out, a3s_error *err)
{
    *out = NULL;
    if (!path || path[0] != '/')
        return a3s_fail(err, A3S_ERR_SETUP, "%s: '%s' is not an absolute path", what,
                        path ? path : "");
    char *real = realpath(path, NULL);
    if (!real)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "%s: %s", what, path);
    struct stat st;
    if (stat(real, &st) < 0) {
        int e = errno;
        free(real);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "%s: %s", what, path);
    }
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111) || access(real, X_OK) < 0) {
        a3s_fail(err, A3S_ERR_SETUP, "%s: %s is not an executable file", what, real);
        free(real);
        return -1;
    }
    if (workspace && a3s_path_within(real, workspace)) {
        a3s_fail(err, A3S_ERR_SETUP,
                 "%s: refusing executable %s from inside the active workspace", what, real);
        free(real);
        return -1;
    }
    *out = real;
    return 0;
}

/* One mount the backend decided to emit, for visibility questions. */
typedef struct emitted {
    enum a3s_fs_kind kind;
    const char *path;
} emitted;

/* A rule inside the workspace, applied by the setup step (protocol.h). */
typedef struct wsop {
    const char *kind;
    const char *path; /* absolute */
    const a3s_scan_id *id;
    unsigned flags;
    int type;
    int depth;
    size_t idx;
    bool mask;
} wsop;

typedef struct builder {
    a3s_strv *out;
    a3s_strv *host; /* the mounts outside the workspace, in bwrap's syntax (see below) */
    const a3s_bwrap_cmd *cmd;
    const char *ws, *scratch;
    bool ws_bound, ws_rw;
    a3s_strv made; /* directories made with --dir (make_parents) */
    a3s_strv nolinks; /* bound roots to be reached with no symbolic link (mnt-bind 4) */
    wsop *ops;
    size_t nops, capops;
    emitted *em;
    size_t nem, capem;
    const char **remount; /* directories to remount read-only at the end */
    size_t nremount, capremount;
    int failed;
} builder;

static void push(builder *b, const char *s)
{
    if (a3s_strv_push(b->out, s) < 0)
        b->failed = 1;
}

static void push3(builder *b, const char *a, const char *c, const char *d)
{
    push(b, a);
    push(b, c);
    if (d)
        push(b, d);
}

/* A mount outside the workspace. bwrap makes only the namespaces, the host root, /dev
 * and /proc; the setup step makes these, in this order (host_records). */
static void hpush3(builder *b, const char *a, const char *c, const char *d)
{
    if (a3s_strv_push(b->host, a) < 0 || a3s_strv_push(b->host, c) < 0 ||
        (d && a3s_strv_push(b->host, d) < 0))
        b->failed = 1;
}

static void remember(builder *b, enum a3s_fs_kind kind, const char *path)
{
    if (b->nem == b->capem) {
        size_t cap = b->capem ? b->capem * 2 : 32;
        emitted *n = realloc(b->em, cap * sizeof *n);
        if (!n) {
            b->failed = 1;
            return;
        }
        b->em = n;
        b->capem = cap;
    }
    b->em[b->nem++] = (emitted){kind, path};
}

static int add_wsop(builder *b, const char *kind, const char *path, const a3s_scan_id *id,
                    unsigned flags, bool mask);

static int cmp_wsop(const void *a, const void *c)
{
    const wsop *x = a, *y = c;
    if (x->mask != y->mask)
        return x->mask ? 1 : -1;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

static void push_rec(builder *b, const char *kind, const char *path, unsigned long long a,
                     unsigned long long c, unsigned long long d, unsigned long long e)
{
    push(b, kind);
    push(b, path);
    char num[32];
    unsigned long long v[4] = {a, c, d, e};
    for (int i = 0; i < 4; i++) {
        snprintf(num, sizeof num, "%llu", v[i]);
        push(b, num);
    }
}

/* bwrap's own /dev and /proc cover the host's ones inside. */
static bool below_own(const char *path)
{
    return a3s_path_within(path, "/dev") || a3s_path_within(path, "/proc");
}

/* The mounts outside the workspace as "mnt-*" records (protocol.h), one per directive of
 * b->host (which `plan` shows as they are); --perms gives the mode of the one after it. */
static void host_records(builder *rec, const a3s_strv *h, const a3s_strv *nolinks)
{
    const char *perms = NULL;
    size_t i = 0;
    while (i < h->n && !rec->failed) {
        const char *d = h->v[i], *x = i + 1 < h->n ? h->v[i + 1] : "";
        const char *y = i + 2 < h->n ? h->v[i + 2] : "";
        unsigned long long mode = perms ? strtoull(perms, NULL, 8) : 0755;
        bool ro = !strcmp(d, "--ro-bind");
        if (!strcmp(d, "--perms") && !perms) {
            perms = x;
            i += 2;
            continue;
        }
        if (!strcmp(d, "--tmpfs") || !strcmp(d, "--dir")) {
            push_rec(rec, d[2] == 't' ? "mnt-tmpfs" : "mnt-dir", x, mode, 0, 0, 0);
            i += 2;
        } else if (!strcmp(d, "--remount-ro") && !perms) {
            push_rec(rec, "mnt-ro", x, 0, 0, 0, 0);
            i += 2;
        } else if (ro && !perms && !strcmp(x, "/dev/null")) {
            push_rec(rec, "mnt-null", y, 0, 0, 0, 0);
            i += 3;
        } else if ((ro || !strcmp(d, "--bind")) && !perms && !strcmp(x, y)) {
            bool as_is = false;
            for (size_t k = 0; k < nolinks->n && !as_is; k++)
                as_is = !strcmp(nolinks->v[k], y);
            push_rec(rec, "mnt-bind", y,
                     (ro ? 1 : 0) | (below_own(y) ? 2 : 0) | (ro && as_is ? 4 : 0), 0, 0, 0);
            i += 3;
        } else {
            rec->failed = 1; /* never: every directive of b->host is one of these */
        }
        perms = NULL;
    }
    if (perms)
        rec->failed = 1;
}

/* The setup records: the mounts outside the workspace, workspace and scratch, then every
 * rule inside the workspace and the held directories (shallowest first, masks last, as
 * bwrap orders its own), then the command's identity. */
static void build_setup(builder *b, builder *rec, const a3s_limits *lim)
{
    const a3s_bwrap_cmd *c = b->cmd;
    const a3s_scan_result *sr = c->scan;
    for (size_t i = 0; sr && i < sr->nholds; i++) {
        const a3s_scan_id *h = &sr->holds[i];
        bool covered = false;
        for (size_t j = 0; j < b->nops && !covered; j++)
            covered = !strcmp(b->ops[j].path, h->path);
        if (!covered && b->ws && a3s_path_within(h->path, b->ws) && strcmp(h->path, b->ws))
            add_wsop(b, "hold", h->path, h, 0, false);
    }
    if (b->nops)
        qsort(b->ops, b->nops, sizeof *b->ops, cmp_wsop);
    push(rec, A3S_SETUP_MAGIC);
    if (c->join && !c->mapped) {
        if (b->ws && b->ws_bound)
            push_rec(rec, "clone", b->ws, (unsigned long long)c->ws_dev,
                     (unsigned long long)c->ws_ino, 0, !b->ws_rw);
        if (b->scratch && c->scratch_src)
            push_rec(rec, "clone", c->scratch_src, (unsigned long long)c->scratch_dev,
                     (unsigned long long)c->scratch_ino, 1, 0);
    }
    host_records(rec, b->host, &b->nolinks);
    if (b->ws && b->ws_bound)
        push_rec(rec, "root", b->ws, (unsigned long long)c->ws_dev,
                 (unsigned long long)c->ws_ino, c->mapped || c->join, 0);
    if (b->ws && !b->ws_bound)
        push_rec(rec, "chdir", b->ws, 0, 0, 0, 0);
    if (b->scratch && (c->scratch_dev || c->scratch_ino))
        push_rec(rec, "scratch", b->scratch, (unsigned long long)c->scratch_dev,
                 (unsigned long long)c->scratch_ino, c->mapped || c->join, 0);
    size_t skip = b->ws && strcmp(b->ws, "/") ? strlen(b->ws) + 1 : 1;
    for (size_t i = 0; i < b->nops; i++) {
        const wsop *o = &b->ops[i];
        push_rec(rec, o->kind, o->path + skip, o->id ? (unsigned long long)o->id->dev : 0,
                 o->id ? (unsigned long long)o->id->ino : 0, o->flags, (unsigned long long)o->type);
    }
    if (c->cwd)
        push_rec(rec, "cwd", c->cwd, 0, 0, 0, 0);
    /* The plan's resource limits, set again by the setup step for itself and the command:
     * a sandbox started before the plan was known has the caller's (ahead.h). */
    if (lim->nofile > 0)
        push_rec(rec, "limit", "nofile", (unsigned long long)lim->nofile, 0, 0, 0);
    if (lim->core_bytes >= 0)
        push_rec(rec, "limit", "core", (unsigned long long)lim->core_bytes, 0, 0, 0);
    if (lim->file_size_bytes > 0)
        push_rec(rec, "limit", "fsize", (unsigned long long)lim->file_size_bytes, 0, 0, 0);
    /* Mapped: run as sandbox uid 1 (the unprivileged host id), shown as root. */
    if (c->mapped)
        push_rec(rec, "ids", "", 1, 1, 0, 0);
    else
        push_rec(rec, "ids", "", 0, 0, c->uid, c->gid);
}

static void remember_remount(builder *b, const char *path)
{
    if (b->nremount == b->capremount) {
        size_t cap = b->capremount ? b->capremount * 2 : 16;
        const char **n = realloc(b->remount, cap * sizeof *n);
        if (!n) {
            b->failed = 1;
            return;
        }
        b->remount = n;
        b->capremount = cap;
    }
    b->remount[b->nremount++] = path;
}

/* The kind of the deepest mount emitted so far that covers path; -1 means the host
 * root (read-only). Later mounts at the same depth win, as in the kernel. */
static int covering(const builder *b, const char *path)
{
    int kind = -1, depth = -1;
    for (size_t i = 0; i < b->nem; i++) {
        if (!a3s_path_within(path, b->em[i].path))
            continue;
        int d = a3s_path_depth(b->em[i].path);
        if (d >= depth) {
            depth = d;
            kind = (int)b->em[i].kind;
        }
    }
    return kind;
}

/* The path of the deepest mount emitted so far that covers path, or NULL. */
static const char *covering_path(const builder *b, const char *path)
{
    const char *best = NULL;
    int depth = -1;
    for (size_t i = 0; i < b->nem; i++) {
        int d = a3s_path_depth(b->em[i].path);
        if (a3s_path_within(path, b->em[i].path) && d >= depth) {
            depth = d;
            best = b->em[i].path;
        }
    }
    return best;
}

static bool hidden_kind(int k);

/* A bind inside a hidden (empty tmpfs) root needs its parents made there; bwrap would
 * copy the modes of the source's parents (0700 for a home), which a command running
 * under another id than bwrap's (root callers) could not traverse. Made 0755 instead:
 * they are empty but for what is bound into them. */
static void make_parents(builder *b, const char *dest)
{
    if (!hidden_kind(covering(b, dest)))
        return;
    const char *top = covering_path(b, dest);
    size_t start = strcmp(top, "/") ? strlen(top) : 0;
    char *copy = a3s_strdup(dest);
    if (!copy) {
        b->failed = 1;
        return;
    }
    for (char *c = copy + start + 1; (c = strchr(c, '/')) != NULL; c++) {
        *c = '\0';
        bool made = false;
        for (size_t i = 0; i < b->made.n && !made; i++)
            made = !strcmp(b->made.v[i], copy);
        if (!made) {
            hpush3(b, "--perms", "0755", NULL);
            hpush3(b, "--dir", copy, NULL);
            if (a3s_strv_push(&b->made, copy) < 0)
                b->failed = 1;
        }
        *c = '/';
    }
    free(copy);
}

static bool hidden_kind(int k)
{
    return k == A3S_FS_HIDE || k == A3S_FS_TMPFS || k == A3S_FS_MASK;
}

static const char *prov_str(const a3s_fs_rule *r, char *buf, size_t n)
{
    if (r->prov.file)
        snprintf(buf, n, "%s:%d", r->prov.file, r->prov.line);
    else
        snprintf(buf, n, "%s", r->discovered ? "<scan>" : "<engine>");
    return buf;
}

/* Sort key: depth, then declaration order (qsort is not stable). */
typedef struct ordered {
    const a3s_fs_rule *r;
    int depth;
    size_t idx;
} ordered;

static int cmp_ordered(const void *a, const void *b)
{
    const ordered *x = a, *y = b;
    if (x->depth != y->depth)
        return x->depth < y->depth ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

/* A rule skipped as redundant (its view is already there) still fails when its path is
 * missing and it is not optional: a policy's required path is required, whatever covers
 * it (policies/README.md). Only existence: what is present is left to the covering view. */
static int skip_rule(const a3s_fs_rule *r, a3s_error *err)
{
    struct stat st;
    char pv[600];
    if (r->optional || r->kind == A3S_FS_MASK || lstat(r->path, &st) == 0 ||
        (errno != ENOENT && errno != ENOTDIR))
        return 0;
    return a3s_fail(err, A3S_ERR_SETUP, "sandbox path %s (%s) does not exist", r->path,
                    prov_str(r, pv, sizeof pv));
}

/* lstat a rule path: 1 present (is_dir set), 0 missing, -1 error (err filled). */
static int probe_path(const a3s_fs_rule *r, bool *is_dir, a3s_error *err)
{
    struct stat st;
    char pv[600];
    if (lstat(r->path, &st) < 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            if (r->optional || r->kind == A3S_FS_MASK)
                return 0;
            return a3s_fail(err, A3S_ERR_SETUP, "sandbox path %s (%s) does not exist",
                            r->path, prov_str(r, pv, sizeof pv));
        }
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "sandbox path %s (%s)", r->path,
                              prov_str(r, pv, sizeof pv));
    }
    if (S_ISLNK(st.st_mode))
        return a3s_fail(err, A3S_ERR_SETUP,
                        "refusing a symbolic link at %s sandbox path %s (%s)",
                        r->kind == A3S_FS_MASK ? "read-denied"
                        : r->kind == A3S_FS_PROTECT ? "write-denied"
                                                    : a3s_fs_kind_name(r->kind),
                        r->path, prov_str(r, pv, sizeof pv));
    *is_dir = S_ISDIR(st.st_mode);
    return 1;
}

static int add_wsop(builder *b, const char *kind, const char *path, const a3s_scan_id *id,
                    unsigned flags, bool mask)
{
    int type = !id ? A3S_SETUP_T_ANY : id->dir ? A3S_SETUP_T_DIR : A3S_SETUP_T_NONDIR;
    /* One op per path where two would collide: a policy may name one path twice (a
     * credential of HOME is also a workspace secret when HOME is the workspace), and the
     * second mount would meet the first one where the scanned entry was. The same kind
     * twice is one op (optional only if both are); a mask stands for any other op on its
     * path, since it is stricter. */
    for (size_t i = 0; i < b->nops; i++) {
        wsop *o = &b->ops[i];
        if (strcmp(o->path, path) != 0)
            continue;
        if (!strcmp(o->kind, kind) && o->mask == mask) {
            o->flags &= flags;
            if (!o->id && id) { /* the scanned identity is checked whichever op came first */
                o->id = id;
                o->type = type;
            }
            return 0;
        }
        if (o->mask)
            return 0;
        if (mask) {
            *o = (wsop){kind, path, id ? id : o->id, flags, type, o->depth, o->idx, true};
            return 0;
        }
    }
    if (b->nops == b->capops) {
        size_t cap = b->capops ? b->capops * 2 : 32;
        wsop *n = realloc(b->ops, cap * sizeof *n);
        if (!n) {
            b->failed = 1;
            return -1;
        }
        b->ops = n;
        b->capops = cap;
    }
    b->ops[b->nops] = (wsop){kind, path, id, flags, type, a3s_path_depth(path), b->nops, mask};
    b->nops++;
    return 0;
}

static const char *wsop_kind(enum a3s_fs_kind k)
{
    switch (k) {
    case A3S_FS_PROTECT: return "protect";
    case A3S_FS_RO: return "ro";
    case A3S_FS_RW: return "rw";
    case A3S_FS_TMPFS: return "tmpfs";
    default: return "mask"; /* HIDE and MASK: empty and read-only */
    }
}

/* A bind of path onto itself (dir: --bind or --ro-bind), made by the setup step, which
 * clones the source from the sandbox's view. One from below /dev or /proc is not the
 * host's there: bwrap binds it first where it is, for the setup step to take it from
 * there (a staged mnt-bind, host_records). */
static void emit_bind(builder *b, const char *dir, const char *path)
{
    if (below_own(path))
        push3(b, dir, path, path);
    hpush3(b, dir, path, path);
}

/* The workspace root or the scratch dir: bound by path (its identity is checked inside),
 * or, for a mapped identity, only the mount point made for the idmapped mount. */
static void emit_root(builder *b, const a3s_fs_rule *r)
{
    make_parents(b, r->path);
    if (b->cmd->mapped || b->cmd->join)
        hpush3(b, "--dir", r->path, NULL);
    else
        emit_bind(b, r->kind == A3S_FS_RW ? "--bind" : "--ro-bind", r->path);
    remember(b, r->kind, r->path);
}

static bool root_kind(enum a3s_fs_kind k)
{
    return k == A3S_FS_RW || k == A3S_FS_RO || k == A3S_FS_PROTECT;
}

static int emit_rule(builder *b, const a3s_fs_rule *r, a3s_error *err)
{
    bool is_dir = false;
    const char *ws = b->ws, *scratch = b->cmd->scratch_dev || b->cmd->scratch_ino ? b->scratch
                                                                                  : NULL;
    if (ws && root_kind(r->kind) && !strcmp(r->path, ws)) {
        emit_root(b, r);
        b->ws_bound = true;
        b->ws_rw = r->kind == A3S_FS_RW;
        return 0;
    }
    if (scratch && r->kind == A3S_FS_RW && !strcmp(r->path, scratch)) {
        emit_root(b, r);
        return 0;
    }
    /* Inside the workspace, paths are the command's to change: never resolved by bwrap. */
    if (ws && strcmp(r->path, ws) != 0 && a3s_path_within(r->path, ws)) {
        const a3s_scan_id *id = a3s_scan_find(b->cmd->scan, r->path);
        unsigned flags = (r->optional || r->kind == A3S_FS_MASK) ? A3S_SETUP_OPTIONAL : 0;
        return add_wsop(b, wsop_kind(r->kind), r->path, id, flags, r->kind == A3S_FS_MASK);
    }
    int cov = covering(b, r->path);
    /* Inside something already hidden, a hide or mask adds nothing. */
    if ((r->kind == A3S_FS_HIDE || r->kind == A3S_FS_MASK || r->kind == A3S_FS_PROTECT) &&
        hidden_kind(cov))
        return skip_rule(r, err);
    /* Read-only over read-only is the same view: skip the redundant mount (fast path). */
    if ((r->kind == A3S_FS_RO || r->kind == A3S_FS_PROTECT) &&
        (cov == -1 || cov == A3S_FS_RO || cov == A3S_FS_PROTECT))
        return skip_rule(r, err);
    int pr = probe_path(r, &is_dir, err);
    if (pr <= 0)
        return pr;
    switch (r->kind) {
    case A3S_FS_HIDE:
    case A3S_FS_MASK:
        if (is_dir) {
            hpush3(b, "--tmpfs", r->path, NULL);
            remember_remount(b, r->path);
        } else {
            /* A /dev/null bind on a nodev mount: open() fails with EACCES. */
            hpush3(b, "--ro-bind", "/dev/null", r->path);
        }
        break;
    case A3S_FS_TMPFS:
        if (!is_dir)
            return a3s_fail(err, A3S_ERR_SETUP, "tmpfs path %s is not a directory", r->path);
        hpush3(b, "--perms", "01777", NULL);
        hpush3(b, "--tmpfs", r->path, NULL);
        break;
    case A3S_FS_RO:
    case A3S_FS_PROTECT:
    case A3S_FS_RW: {
        /* A bound root follows the workspace's rule for links (wspath.h): one that a
         * sandboxed command could have planted must not choose what is bound. */
        char link[PATH_MAX], pv[600];
        int links = a3s_wspath_bind_links(r->path, link, sizeof link);
        /* Spelled as it is: the setup step must then reach it with no link either (one
         * swapped in meanwhile refuses the run). */
        if (links == 0 && a3s_strv_push(&b->nolinks, r->path) < 0)
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        if (links < 0)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "%s root %s (%s) passes through the symbolic link %s in a "
                            "directory you can write (a sandboxed command could have planted "
                            "it): name the path it stands for",
                            r->kind == A3S_FS_RW ? "writable" : "read-only", r->path,
                            prov_str(r, pv, sizeof pv), link);
        make_parents(b, r->path);
        emit_bind(b, r->kind == A3S_FS_RW ? "--bind" : "--ro-bind", r->path);
        break;
    }
    default:
        return a3s_fail(err, A3S_ERR_INTERNAL, "unknown filesystem rule kind %d", r->kind);
    }
    remember(b, r->kind, r->path);
    return 0;
}

static int build_mounts(builder *b, const a3s_plan *p, a3s_error *err)
{
    /* The plan's rules, then the scan's and the pins (a3s_bwrap_cmd.more): one order. */
    const a3s_bwrap_cmd *c = b->cmd;
    size_t total = p->nfs + c->nmore;
    ordered *o = calloc(total ? total : 1, sizeof *o);
    if (!o)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < p->nfs; i++, n++)
        o[n] = (ordered){&p->fs[i], a3s_path_depth(p->fs[i].path), n};
    for (size_t i = 0; i < c->nmore; i++, n++)
        o[n] = (ordered){&c->more[i], a3s_path_depth(c->more[i].path), n};
    qsort(o, n, sizeof *o, cmp_ordered);
    int rc = 0;
    /* Pass 1: everything but masks, shallowest first. Pass 2: masks, so a secret stays
     * masked even inside a root re-exposed later in pass 1. */
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (size_t i = 0; i < n && rc == 0; i++)
            if ((o[i].r->kind == A3S_FS_MASK) == (pass == 1))
                rc = emit_rule(b, o[i].r, err);
    free(o);
    return rc;
}


/* A helper program executed through its embedded image's fd (protocol.h). */
static bool is_fd_path(const char *p)
{
    return strncmp(p, "/proc/self/fd/", 14) == 0;
}

/* The namespaces, the setup step's capabilities and the read-only host view with /dev
 * and /proc: what every sandbox (a fresh run or a session) starts from. */
static void push_base(builder *b, bool unshare_net, bool mapped)
{
    char num[32];
    push(b, "--die-with-parent");
    push(b, "--new-session");
    /* The setup step runs as uid 0 of the sandbox's user namespace with the capabilities
     * it needs to mount by fd (also in directories a command made unsearchable) and to
     * enter the command's nested namespace; it drops them all before the command (and
     * before its seccomp filter, which it installs itself, as it also denies further
     * user namespaces). */
    if (mapped) {
        snprintf(num, sizeof num, "%d", A3S_FD_USERNS);
        push3(b, "--userns", num, NULL);
    } else {
        push(b, "--unshare-user");
    }
    push3(b, "--uid", "0", NULL);
    push3(b, "--gid", "0", NULL);
    push(b, "--unshare-pid");
    push(b, "--unshare-ipc");
    push(b, "--unshare-uts");
    push(b, "--unshare-cgroup-try");
    if (unshare_net)
        push(b, "--unshare-net");
    push3(b, "--hostname", "a3s-sandbox", NULL);
    push3(b, "--cap-drop", "ALL", NULL);
    push3(b, "--cap-add", "CAP_SYS_ADMIN", NULL);
    push3(b, "--cap-add", "CAP_DAC_OVERRIDE", NULL);
    push3(b, "--cap-add", "CAP_SETUID", NULL);
    push3(b, "--cap-add", "CAP_SETGID", NULL);
    push3(b, "--cap-add", "CAP_SETFCAP", NULL);
    /* bwrap's own mounts, those of a bare bwrap. Every other one is the setup step's
     * (hpush3): bwrap reads the whole mount table again after each bind or remount. */
    push3(b, "--ro-bind", "/", "/");
    push3(b, "--dev", "/dev", NULL);
    push3(b, "--proc", "/proc", NULL);
}

/* A fresh run's options after the mounts: bwrap leaves the sandbox in "/" (see below),
 * with only the command's environment (env: none yet, for a sandbox started ahead,
 * whose launcher gets it with its command), its status on A3S_FD_STATUS and the launcher
 * as pid 1 unless a relay comes first. */
static void push_tail(builder *b, const a3s_strv *env, bool relay)
{
    char num[32];
    push3(b, "--chdir", "/", NULL);
    push(b, "--clearenv");
    for (size_t i = 0; env && i < env->n; i++) {
        const char *eq = strchr(env->v[i], '=');
        if (!eq)
            continue;
        char *name = a3s_strndup(env->v[i], (size_t)(eq - env->v[i]));
        if (!name) {
            b->failed = 1;
            break;
        }
        push3(b, "--setenv", name, eq + 1);
        free(name);
    }
    snprintf(num, sizeof num, "%d", A3S_FD_STATUS);
    push3(b, "--json-status-fd", num, NULL);
    /* The launcher is the pid namespace's init (it reaps orphans, and its end ends the
     * namespace, as a session's command's does: launch.c): bwrap's own reaper would be
     * one more process per run (2.5 ms of a run on a virtual machine). Under a relay,
     * which reaps only its own child, bwrap's reaper stays. */
    if (!relay)
        push(b, "--as-pid-1");
}

int a3s_bwrap_session_args(const a3s_plan *p, bool mapped, a3s_strv *out, a3s_error *err)
{
    a3s_bwrap_cmd none = {.mapped = mapped};
    builder b = {.out = out, .cmd = &none};
    push_base(&b, p->network == A3S_NET_NONE, mapped);
    if (b.failed)
        return a3s_fail(err, A3S_ERR_INTERNAL, "building the bwrap arguments: out of memory");
    return 0;
}

int a3s_bwrap_ahead_args(bool mapped, a3s_strv *out, a3s_error *err)
{
    a3s_bwrap_cmd none = {.mapped = mapped};
    builder b = {.out = out, .cmd = &none};
    push_base(&b, true, mapped);
    push_tail(&b, NULL, false);
    if (b.failed)
        return a3s_fail(err, A3S_ERR_INTERNAL, "building the bwrap arguments: out of memory");
    return 0;
}

int a3s_bwrap_build_args(const a3s_plan *p, const a3s_strv *env, const a3s_bwrap_cmd *cmd,
                         a3s_strv *out, a3s_strv *host, a3s_strv *cmd_out, a3s_strv *setup,
                         a3s_error *err)
{
    builder b = {.out = out, .host = host, .cmd = cmd, .ws = p->workspace,
                 .scratch = p->scratch};

    push_base(&b, p->network == A3S_NET_NONE, cmd->mapped);
    /* The command maps to the caller's uid; for a root caller that is the host's root, and
     * procfs checks many host-global knobs (/proc/sys, sysrq-trigger) by uid alone. */
    hpush3(&b, "--remount-ro", "/proc", NULL);
    if (build_mounts(&b, p, err) < 0)
        goto fail;
    /* A launcher given by path must be reachable inside even when it lives under a
     * hidden root (a build tree in HOME): bind the one file read-only. An embedded image
     * is executed through its fd and needs nothing. */
    if (!is_fd_path(cmd->launcher) && hidden_kind(covering(&b, cmd->launcher)))
    {
        make_parents(&b, cmd->launcher);
        hpush3(&b, "--ro-bind", cmd->launcher, cmd->launcher);
    }
    if (cmd->relay && !is_fd_path(cmd->relay) && hidden_kind(covering(&b, cmd->relay)))
    {
        make_parents(&b, cmd->relay);
        hpush3(&b, "--ro-bind", cmd->relay, cmd->relay);
    }
    /* Hidden directories become read-only last, once nothing more is mounted inside. */
    for (size_t i = b.nremount; i-- > 0;)
        hpush3(&b, "--remount-ro", b.remount[i], NULL);
    /* bwrap sees the host before the setup step's mounts: a directory entered there could
     * end up hidden below them and still be the command's. The setup step enters the
     * workspace once every mount is made (its mount, or a "chdir" record by path; then
     * the working directory: a "cwd" record). */
    push_tail(&b, env, cmd->relay != NULL);
    /* bwrap reads only options from --args: the command goes on the real argv. */
    builder rec = {.out = setup};
    build_setup(&b, &rec, &p->limits);
    b.failed |= rec.failed;
    builder c = {.out = cmd_out};
    push(&c, "--");
    push(&c, cmd->launcher);
    if (cmd->tag)
        push3(&c, "--tag", cmd->tag, NULL);
    if (cmd->join)
        push(&c, "--join");
    push(&c, "--setup");
    if (cmd->relay)
        push(&c, "--exec");
    push(&c, "--");
    if (cmd->relay) {
        char fd[16];
        snprintf(fd, sizeof fd, "%d", A3S_FD_CMD_FILTER);
        push(&c, cmd->relay);
        char ch[16];
        snprintf(ch, sizeof ch, "%d", A3S_FD_MEDIATOR);
        push3(&c, "--channel-fd", ch, NULL);
        push3(&c, "--http", A3S_RELAY_HTTP, NULL);
        push3(&c, "--socks", A3S_RELAY_SOCKS, NULL);
        push3(&c, "--filter-fd", fd, NULL);
        push(&c, "--");
        push(&c, cmd->launcher);
        push(&c, "--");
    }
    if (cmd->argv) {
        for (size_t i = 0; cmd->argv[i]; i++)
            push(&c, cmd->argv[i]);
    } else {
        push(&c, cmd->shell);
        push(&c, "-c");
        push(&c, "--"); /* a command that starts with '-' is the command, not an option */
        push(&c, cmd->shell_command);
    }
    b.failed |= c.failed;
    if (b.failed) {
        a3s_fail(err, A3S_ERR_INTERNAL, "building the bwrap arguments: out of memory");
        goto fail;
    }
    free(b.em);
    free(b.remount);
    free(b.ops);
    a3s_strv_free(&b.made);
    a3s_strv_free(&b.nolinks);
    return 0;
fail:
    free(b.em);
    free(b.remount);
    free(b.ops);
    a3s_strv_free(&b.made);
    a3s_strv_free(&b.nolinks);
    return -1;
}

int a3s_bwrap_args_memfd(const a3s_strv *args, a3s_error *err)
{
    int fd = memfd_create("a3s-bwrap-args", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "bwrap arguments: memfd_create");
    /* One write: the vector is assembled in memory first. */
    size_t total = 0;
    for (size_t i = 0; i < args->n; i++)
        total += strlen(args->v[i]) + 1;
    char *buf = malloc(total ? total : 1);
    if (!buf) {
        close(fd);
        return a3s_fail(err, A3S_ERR_INTERNAL, "bwrap arguments: out of memory");
    }
    size_t off = 0;
    for (size_t i = 0; i < args->n; i++) {
        size_t n = strlen(args->v[i]) + 1;
        memcpy(buf + off, args->v[i], n);
        off += n;
    }
    int wrc = a3s_write_all(fd, buf, total);
    int werr = errno;
    free(buf);
    if (wrc < 0) {
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, werr, "bwrap arguments: write");
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0 ||
        lseek(fd, 0, SEEK_SET) < 0) {
        int e = errno;
        close(fd);
        return a3s_fail_errno(err, A3S_ERR_SETUP, e, "bwrap arguments: seal");
    }
    return fd;
}

char *a3s_bwrap_args_json(const char *bwrap, const a3s_strv *args, const a3s_strv *cmd)
{
    /* Paths are bytes: every entry goes through a3s_json_str (a string, or a base64
     * object when it is not UTF-8), and any failure fails the whole array, so the dump
     * never has fewer entries than the real argv. */
    json_t *a = json_array();
    bool ok = !bwrap || a3s_json_push(a, a3s_json_cstr(bwrap)) == 0;
    for (size_t i = 0; ok && i < args->n; i++)
        ok = a3s_json_push(a, a3s_json_cstr(args->v[i])) == 0;
    for (size_t i = 0; ok && cmd && i < cmd->n; i++)
        ok = a3s_json_push(a, a3s_json_cstr(cmd->v[i])) == 0;
    char *s = ok ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}
