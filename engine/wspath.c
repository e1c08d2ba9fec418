/* Opening the workspace once, by file descriptor, with the symbolic-link rule.
 *
 * The path is walked one component at a time (openat with O_NOFOLLOW): what is opened is
 * what was checked, and the canonical path is built from what was actually walked. A
 * symbolic link is followed only when the caller can neither write nor own (and so
 * chmod) the directory that holds it: a link that a sandboxed command (which writes as
 * the caller) could have planted must never re-root a later run's workspace. Root can
 * write every directory, so a root caller passes canonical paths. */
#include "wspath.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef O_PATH
#define O_PATH O_RDONLY
#endif

#define MAX_LINKS 40

/* Whether the caller can change the directory dir (at dirfd): write it, or own it (an
 * owner who cannot write it now can chmod it: a sandboxed command, which runs as the
 * caller, can make its own directory read-only after planting a link there). */
static bool caller_may_change(int dirfd, const char *dir)
{
    struct stat st;
    if (faccessat(dirfd, dir, W_OK, 0) == 0)
        return true;
    return fstatat(dirfd, dir, &st, 0) < 0 || st.st_uid == getuid() || st.st_uid == geteuid();
}

/* The components still to walk, as one buffer consumed from the front. */
typedef struct walk {
    char *pending; /* "a/b/c" */
    char *canon;
    size_t len, cap;
} walk;

static int canon_push(walk *w, const char *comp)
{
    size_t n = strlen(comp);
    if (w->len + n + 2 > w->cap) {
        size_t cap = (w->len + n + 2) * 2;
        char *c = realloc(w->canon, cap);
        if (!c)
            return -1;
        w->canon = c;
        w->cap = cap;
    }
    w->canon[w->len++] = '/';
    memcpy(w->canon + w->len, comp, n + 1);
    w->len += n;
    return 0;
}

static void canon_pop(walk *w)
{
    while (w->len > 0 && w->canon[w->len - 1] != '/')
        w->len--;
    if (w->len > 0)
        w->len--;
    w->canon[w->len] = '\0';
}

/* Replace the front of pending: `target` then what followed the link. */
static int splice_link(walk *w, const char *target, const char *rest)
{
    size_t tl = strlen(target), rl = strlen(rest);
    char *n = malloc(tl + rl + 2);
    if (!n)
        return -1;
    memcpy(n, target, tl);
    n[tl] = '/';
    memcpy(n + tl + 1, rest, rl + 1);
    free(w->pending);
    w->pending = n;
    return 0;
}

int a3s_wspath_open(const char *given, char **canonical, int *fd_out, a3s_error *err)
{
    *canonical = NULL;
    *fd_out = -1;
    walk w = {0};
    int cur = -1, rc = -1, links = 0;
    char *abs = NULL;
    if (!given || !*given)
        return a3s_fail(err, A3S_ERR_INVALID, "the sandbox workspace path is empty");
    if (given[0] == '/') {
        abs = a3s_strdup(given);
    } else {
        char *cwd = getcwd(NULL, 0);
        if (!cwd)
            return a3s_fail_errno(err, A3S_ERR_INVALID, errno,
                                  "failed to canonicalize the sandbox workspace '%s'", given);
        size_t n = strlen(cwd) + strlen(given) + 2;
        if ((abs = malloc(n)) != NULL) {
            memcpy(abs, cwd, strlen(cwd));
            abs[strlen(cwd)] = '/';
            memcpy(abs + strlen(cwd) + 1, given, strlen(given) + 1);
        }
        free(cwd);
    }
    if (!abs || !(w.pending = a3s_strdup(abs + 1)) || !(w.canon = calloc(1, 64))) {
        a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        goto out;
    }
    w.cap = 64;
    if ((cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
        a3s_fail_errno(err, A3S_ERR_INVALID, errno, "cannot open /");
        goto out;
    }
    while (*w.pending) {
        char *slash = strchr(w.pending, '/');
        char *rest = slash ? slash + 1 : w.pending + strlen(w.pending);
        if (slash)
            *slash = '\0';
        char comp[NAME_MAX + 1];
        if (strlen(w.pending) > NAME_MAX) {
            a3s_fail(err, A3S_ERR_INVALID, "sandbox workspace '%s': a component is too long",
                     given);
            goto out;
        }
        strcpy(comp, w.pending);
        memmove(w.pending, rest, strlen(rest) + 1);
        if (!comp[0] || !strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            int up = openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (up < 0) {
                a3s_fail_errno(err, A3S_ERR_INVALID, errno, "sandbox workspace '%s'", given);
                goto out;
            }
            close(cur);
            cur = up;
            canon_pop(&w);
            continue;
        }
        struct stat st;
        if (fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            a3s_fail_errno(err, A3S_ERR_INVALID, errno,
                           "failed to canonicalize the sandbox workspace '%s'", given);
            goto out;
        }
        if (S_ISLNK(st.st_mode)) {
            if (++links > MAX_LINKS) {
                a3s_fail_errno(err, A3S_ERR_INVALID, ELOOP, "sandbox workspace '%s'", given);
                goto out;
            }
            if (caller_may_change(cur, ".")) {
                char *real = realpath(abs, NULL);
                a3s_fail(err, A3S_ERR_INVALID,
                         "sandbox workspace '%s' passes through the symbolic link %s%s%s in "
                         "a directory you can write or own (a sandboxed command could have planted "
                         "it); pass the canonical path %s instead",
                         given, w.canon, "/", comp, real ? real : "(unresolvable)");
                free(real);
                goto out;
            }
            char target[PATH_MAX];
            ssize_t tl = readlinkat(cur, comp, target, sizeof target - 1);
            if (tl < 0) {
                a3s_fail_errno(err, A3S_ERR_INVALID, errno, "sandbox workspace '%s'", given);
                goto out;
            }
            target[tl] = '\0';
            if (splice_link(&w, target[0] == '/' ? target + 1 : target, w.pending) < 0) {
                a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
                goto out;
            }
            if (target[0] == '/') {
                int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (root < 0) {
                    a3s_fail_errno(err, A3S_ERR_INVALID, errno, "cannot open /");
                    goto out;
                }
                close(cur);
                cur = root;
                w.len = 0;
                w.canon[0] = '\0';
            }
            continue;
        }
        int next = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (next < 0) {
            /* ELOOP: it became a link since the stat; ENOTDIR: not a directory. */
            if (errno == ENOTDIR)
                a3s_fail(err, A3S_ERR_INVALID, "sandbox workspace %s/%s is not a directory",
                         w.canon, comp);
            else
                a3s_fail_errno(err, A3S_ERR_INVALID, errno, "sandbox workspace %s/%s",
                               w.canon, comp);
            goto out;
        }
        close(cur);
        cur = next;
        if (canon_push(&w, comp) < 0) {
            a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
            goto out;
        }
    }
    /* An O_PATH fd cannot be listed: the scan and the pins need a real one. */
    int fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        a3s_fail_errno(err, A3S_ERR_INVALID, errno, "cannot open the sandbox workspace %s",
                       w.len ? w.canon : "/");
        goto out;
    }
    if (w.len == 0)
        strcpy(w.canon, "/");
    *canonical = w.canon;
    w.canon = NULL;
    *fd_out = fd;
    rc = 0;
out:
    if (cur >= 0)
        close(cur);
    free(w.pending);
    free(w.canon);
    free(abs);
    return rc;
}

int a3s_wspath_passes_within(const char *path, const char *root)
{
    walk w = {0};
    int rc = 0, links = 0;
    /* The root's identity: another mount of it (a bind mount of the workspace or of a
     * directory holding it) is the same directory under another name. */
    struct stat rst;
    bool have_root = stat(root, &rst) == 0 && S_ISDIR(rst.st_mode);
    if (path[0] != '/' || !(w.pending = a3s_strdup(path + 1)) || !(w.canon = calloc(1, 64))) {
        free(w.pending);
        return -1;
    }
    w.cap = 64;
    while (*w.pending && rc == 0) {
        char *slash = strchr(w.pending, '/');
        char *rest = slash ? slash + 1 : w.pending + strlen(w.pending);
        if (slash)
            *slash = '\0';
        char comp[NAME_MAX + 1];
        if (strlen(w.pending) > NAME_MAX) {
            rc = 1; /* the kernel would refuse it too; what it means is unknown: closed */
            break;
        }
        strcpy(comp, w.pending);
        memmove(w.pending, rest, strlen(rest) + 1);
        if (!comp[0] || !strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            canon_pop(&w);
        } else {
            if (canon_push(&w, comp) < 0) {
                rc = -1;
                break;
            }
            struct stat st;
            if (lstat(w.canon, &st) < 0) {
                /* Nothing below a missing component; any other failure (a path too long
                 * to name, a directory that cannot be searched) leaves the answer unknown,
                 * and unknown counts as passing through. */
                if (errno != ENOENT && errno != ENOTDIR)
                    rc = 1;
                break;
            }
            if (have_root && S_ISDIR(st.st_mode) && st.st_dev == rst.st_dev &&
                st.st_ino == rst.st_ino)
                rc = 1;
            if (S_ISLNK(st.st_mode)) {
                char target[PATH_MAX];
                ssize_t tl = readlink(w.canon, target, sizeof target - 1);
                if (tl < 0 || ++links > MAX_LINKS) {
                    rc = 1;
                    break;
                }
                target[tl] = '\0';
                canon_pop(&w); /* the directory holding the link */
                if (splice_link(&w, target[0] == '/' ? target + 1 : target, w.pending) < 0) {
                    rc = -1;
                    break;
                }
                if (target[0] == '/') {
                    w.len = 0;
                    w.canon[0] = '\0';
                }
            }
        }
        if (a3s_path_within(w.len ? w.canon : "/", root))
            rc = 1;
    }
    free(w.pending);
    free(w.canon);
    return rc;
}

int a3s_wspath_bind_links(const char *path, char *link, size_t n)
{
    size_t len = strlen(path);
    char *pre = a3s_strdup(path);
    int rc = 0;
    for (size_t i = 1; pre && i <= len && rc >= 0; i++) {
        if (i < len && path[i] != '/')
            continue;
        pre[i] = '\0';
        struct stat st;
        if (lstat(pre, &st) < 0)
            break;
        if (S_ISLNK(st.st_mode)) {
            /* The directory holding it, as spelled (its own links were checked before). */
            char *slash = strrchr(pre, '/');
            char saved = slash[1];
            slash[1] = '\0';
            rc = caller_may_change(AT_FDCWD, pre) ? -1 : 1;
            slash[1] = saved;
            if (rc < 0)
                snprintf(link, n, "%s", pre);
        }
        pre[i] = path[i];
    }
    if (!pre) {
        snprintf(link, n, "%s", path);
        rc = -1; /* out of memory: refuse rather than guess */
    }
    free(pre);
    return rc;
}
