/* Other names of a host directory, from the mount table (aliases.h).
 *
 * Each mountinfo line gives a mount's id, device, the path of its root inside that
 * filesystem, and where it is mounted. The mount on top at `path` tells where `path` is
 * inside its filesystem; every other mount of the same filesystem whose root lies above
 * that place shows `path` again under its own mount point, and every one whose root lies
 * below it shows a part of `path`. A mount counts only where it is reachable: the mount
 * on top at its mount point is that very mount (statx's mount id), so a mount covered by
 * another is not named, and nothing inside `path` (which a command may change) decides.
 * Linux only: elsewhere (macOS) there is no mount table of this kind and no bind mount
 * without an explicit nullfs, and every path has no aliases. */
#include "aliases.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#ifdef __linux__
#include <sys/sysmacros.h>
#endif
#include <unistd.h>

#include "util.h"

#ifdef __linux__

typedef struct mnt {
    uint64_t id;
    dev_t dev;
    char *root, *point; /* unescaped, inside the mount table's buffer; root NULL: no path */
} mnt;

/* The mount table's text, whole. NULL with errno. */
static char *read_table(const char *file, size_t *n)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 16384, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (len + 1 >= cap) {
            char *g = realloc(buf, cap * 2);
            if (!g) {
                free(buf);
                buf = NULL;
                errno = ENOMEM;
                break;
            }
            buf = g;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            buf = NULL;
            errno = e;
            break;
        }
        if (r == 0) {
            buf[len] = '\0';
            *n = len;
            break;
        }
        len += (size_t)r;
    }
    int e = errno;
    close(fd);
    errno = e;
    return buf;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo: undone in place. */
static void unescape(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++) {
        if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
            p[3] >= '0' && p[3] <= '7') {
            *o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
            p += 3;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

/* Splits the table into mounts (pointing into buf). A mount whose root is no path (a
 * namespace file bound somewhere: "net:[4026531833]") shows no directory: its root is
 * NULL (it is no alias, but a mount point all the same). -1 with errno on ENOMEM or a
 * line that is not a mountinfo line (EINVAL: nothing can be concluded from it). */
static int parse(char *buf, mnt **out, size_t *n)
{
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    for (char *line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        char *f[5], *save = NULL, *s = line;
        int k = 0;
        for (; k < 5 && (f[k] = strtok_r(s, " ", &save)) != NULL; k++)
            s = NULL;
        unsigned maj, min;
        unsigned long long id;
        if (k < 5 || sscanf(f[0], "%llu", &id) != 1 ||
            sscanf(f[2], "%u:%u", &maj, &min) != 2 || f[4][0] != '/') {
            free(*out);
            *out = NULL;
            errno = EINVAL;
            return -1;
        }

        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            mnt *g = realloc(*out, cap * sizeof *g);
            if (!g) {
                free(*out);
                *out = NULL;
                errno = ENOMEM;
                return -1;
            }
            *out = g;
        }
        unescape(f[3]);
        unescape(f[4]);
        (*out)[(*n)++] =
            (mnt){(uint64_t)id, makedev(maj, min), f[3][0] == '/' ? f[3] : NULL, f[4]};
        line = next;
    }
    return 0;
}

/* base joined with the part of p below prefix (p within prefix). NULL on ENOMEM. */
static char *rebase(const char *base, const char *p, const char *prefix)
{
    const char *rest = strcmp(prefix, "/") == 0 ? p : p + strlen(prefix);
    if (*rest == '/')
        rest++;
    size_t bl = strlen(base), rl = strlen(rest);
    char *o = malloc(bl + rl + 2);
    if (!o)
        return NULL;
    memcpy(o, base, bl);
    size_t at = bl;
    if (rl) {
        if (at == 0 || o[at - 1] != '/')
            o[at++] = '/';
        memcpy(o + at, rest, rl);
        at += rl;
    }
    o[at] = '\0';
    if (at == 0)
        strcpy(o, "/");
    return o;
}

/* The id of the mount on top at path (statx, Linux 5.8; the kernel's stx_mnt_id, which
 * this C library's struct statx still calls padding), or 0 when it cannot be had. */
static uint64_t mount_id(const char *path, int flags)
{
    struct statx sx;
    _Static_assert(sizeof sx >= 0x98, "struct statx holds stx_mnt_id at 0x90");
    if (statx(AT_FDCWD, path, flags, STATX_MNT_ID, &sx) < 0 || !(sx.stx_mask & STATX_MNT_ID))
        return 0;
    uint64_t id;
    memcpy(&id, (const char *)&sx + 0x90, sizeof id);
    return id;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The strings of v sorted, without duplicates, each NUL-ended, into *out (NULL, 0 when
 * v is empty). 0, or -1 with ENOMEM. */
static int join_sorted(a3s_strv *v, char **out, size_t *len)
{
    if (!v->n)
        return 0;
    qsort(v->v, v->n, sizeof *v->v, cmp_str);
    a3s_sbuf b = {0};
    for (size_t i = 0; i < v->n; i++)
        if (i == 0 || strcmp(v->v[i], v->v[i - 1]) != 0)
            a3s_sbuf_add(&b, v->v[i], strlen(v->v[i]) + 1);
    if (b.failed) {
        free(b.s);
        errno = ENOMEM;
        return -1;
    }
    *out = b.s;
    *len = b.n;
    return 0;
}

struct a3s_mount_table {
    char *text; /* the table's text, which the entries point into */
    mnt *m;
    size_t n;
    uint64_t *uid; /* the mounts' unique ids (listmount, Linux 6.8), or NULL */
    size_t nuid;
};

/* The unique ids of every mount of this namespace (listmount(2) from its root), which the
 * kernel never gives twice: mountinfo's ids are reused, so an unmount and a mount of the
 * same place can leave the very same line. NULL where the kernel has no listmount. */
#ifndef SYS_listmount
#define SYS_listmount 458
#endif
static uint64_t *unique_ids(size_t *n)
{
    struct {
        uint32_t size, spare;
        uint64_t mnt_id, param;
    } req = {24, 0, ~0ULL, 0}; /* LSMT_ROOT: the namespace's root; param: after this id */
    size_t cap = 256, got = 0;
    uint64_t *ids = NULL;
    for (;;) {
        uint64_t *g = realloc(ids, cap * sizeof *g);
        if (!g)
            break;
        ids = g;
        long r = syscall(SYS_listmount, &req, ids + got, cap - got, 0);
        if (r < 0)
            break;
        got += (size_t)r;
        if (got < cap) {
            *n = got;
            return ids;
        }
        req.param = ids[got - 1];
        cap *= 2;
    }
    free(ids);
    *n = 0;
    return NULL;
}

a3s_mount_table *a3s_aliases_table(const char *mountinfo)
{
    a3s_mount_table *t = calloc(1, sizeof *t);
    size_t tn = 0;
    if (!t)
        return NULL;
    if (!(t->text = read_table(mountinfo ? mountinfo : "/proc/self/mountinfo", &tn)) ||
        parse(t->text, &t->m, &t->n) < 0) {
        int e = errno;
        a3s_aliases_table_free(t);
        errno = e;
        return NULL;
    }
    if (!mountinfo)
        t->uid = unique_ids(&t->nuid);
    return t;
}

int a3s_aliases_below(const a3s_mount_table *t, const char *path, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    a3s_strv found = {0};
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->m[i].point, path) != 0 && a3s_path_within(t->m[i].point, path) &&
            a3s_strv_push(&found, t->m[i].point) < 0) {
            a3s_strv_free(&found);
            errno = ENOMEM;
            return -1;
        }
    int rc = join_sorted(&found, out, len);
    a3s_strv_free(&found);
    return rc;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

void a3s_aliases_table_digest(const a3s_mount_table *t, char hex[17])
{
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < t->n; i++) {
        const mnt *e = &t->m[i];
        uint64_t dev = (uint64_t)e->dev;
        const char *root = e->root ? e->root : "";
        h = fnv(h, &e->id, sizeof e->id);
        h = fnv(h, &dev, sizeof dev);
        h = fnv(h, root, strlen(root) + 1);
        h = fnv(h, e->point, strlen(e->point) + 1);
    }
    /* In the order listmount gives them (a walk of the tree): any unmount or mount since
     * changes them. */
    h = fnv(h, t->uid, t->nuid * sizeof *t->uid);
    snprintf(hex, 17, "%016llx", (unsigned long long)h);
}

void a3s_aliases_table_free(a3s_mount_table *t)
{
    if (!t)
        return;
    free(t->m);
    free(t->text);
    free(t->uid);
    free(t);
}

int a3s_aliases_of(const char *path, const char *mountinfo, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    a3s_mount_table *t = a3s_aliases_table(mountinfo);
    if (!t)
        return -1;
    int rc = a3s_aliases_in(t, path, out, len);
    int e = errno;
    a3s_aliases_table_free(t);
    errno = e;
    return rc;
}

int a3s_aliases_in(const a3s_mount_table *t, const char *path, char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    struct stat pst;
    if (path[0] != '/' || stat(path, &pst) < 0)
        return 0; /* nothing there: nothing to show elsewhere */
    const mnt *m = t->m;
    size_t n = t->n;
    a3s_strv found = {0};
    int rc = -1, saved;
    /* The mount holding path: the one on top there, by its id (a mount covered by
     * another one at the same place or above it holds nothing anyone sees); without ids,
     * the deepest mount point above it, the last one listed there. */
    uint64_t pid = mount_id(path, 0);
    const mnt *home = NULL;
    for (size_t i = 0; i < n && pid; i++)
        if (m[i].root && m[i].id == pid && a3s_path_within(path, m[i].point))
            home = &m[i];
    bool by_id = home != NULL;
    for (size_t i = 0; i < n && !by_id; i++)
        if (m[i].root && a3s_path_within(path, m[i].point) &&
            (!home || strlen(m[i].point) >= strlen(home->point)))
            home = &m[i];
    if (!home) {
        errno = EINVAL;
        goto out;
    }
    char *fs_path = rebase(home->root, path, home->point); /* path inside its filesystem */
    if (!fs_path)
        goto out;
    bool oom = false;
    for (size_t i = 0; i < n && !oom; i++) {
        const mnt *e = &m[i];
        if (e == home || !e->root || e->dev != home->dev || a3s_path_within(e->point, path))
            continue;
        bool whole = a3s_path_within(fs_path, e->root), part = !whole &&
                     a3s_path_within(e->root, fs_path);
        if (!whole && !part)
            continue;
        /* Reachable: the mount on top at its mount point is this one. Nothing below path
         * is looked at, so what a command changes in the workspace cannot hide a name
         * (without ids: its mount point must at least be of the same filesystem). */
        /* A mount point that cannot be examined (a directory on the way the caller
         * cannot search) counts as reachable: the command may be able to. */
        if (pid) {
            uint64_t on_top = mount_id(e->point, AT_SYMLINK_NOFOLLOW);
            if (on_top != 0 && on_top != e->id)
                continue;
        } else {
            struct stat st;
            if (lstat(e->point, &st) == 0 && st.st_dev != pst.st_dev)
                continue;
        }
        /* whole: this mount shows path itself; part: a directory inside it. */
        char *alias = whole ? rebase(e->point, fs_path, e->root) : a3s_strdup(e->point);
        if (!alias) {
            oom = true;
            break;
        }
        if (!(whole && (strcmp(alias, path) == 0 || a3s_path_within(alias, path))))
            oom = a3s_strv_push(&found, alias) < 0;
        free(alias);
    }
    free(fs_path);
    if (oom) {
        errno = ENOMEM;
        goto out;
    }
    rc = join_sorted(&found, out, len);
out:
    saved = errno;
    a3s_strv_free(&found);
    errno = saved;
    return rc;
}

#else

struct a3s_mount_table {
    int unused;
};

a3s_mount_table *a3s_aliases_table(const char *mountinfo)
{
    (void)mountinfo;
    return calloc(1, sizeof(a3s_mount_table));
}

void a3s_aliases_table_free(a3s_mount_table *t)
{
    free(t);
}

int a3s_aliases_in(const a3s_mount_table *t, const char *path, char **out, size_t *len)
{
    (void)t;
    (void)path;
    *out = NULL;
    *len = 0;
    return 0;
}

int a3s_aliases_of(const char *path, const char *mountinfo, char **out, size_t *len)
{
    (void)path;
    (void)mountinfo;
    *out = NULL;
    *len = 0;
    return 0;
}

int a3s_aliases_below(const a3s_mount_table *t, const char *path, char **out, size_t *len)
{
    return a3s_aliases_in(t, path, out, len);
}

void a3s_aliases_table_digest(const a3s_mount_table *t, char hex[17])
{
    (void)t;
    snprintf(hex, 17, "%016x", 0);
}

#endif
