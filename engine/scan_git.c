/* The workspace scan's git directories: a `.git` file's "gitdir: PATH" line names the
 * directory host git will use; when that lies inside the workspace it is protected and
 * the directories on the way to it held, each with the identity seen by fd. */
#include "scan_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GITDIR_MAX 4096

/* A `.git` below the top (a submodule's, a nested repository's): host git reads it when
 * it recurses, so it is read-only like the top one, its directories are held, and a
 * `.git` file's gitdir target is protected too. */
int a3s_scan_nested_git(struct scan *s, int dfd, const char *name, unsigned char type,
                        int64_t depth)
{
    struct stat st;
    int r = a3s_scan_entry_stat(s, dfd, name, &st);
    if (r <= 0)
        return r;
    if (S_ISLNK(st.st_mode))
        return a3s_fail(s->err, A3S_ERR_POLICY,
                        "refusing a symbolic link at protected workspace path %s", s->path);
    if (a3s_scan_hold_ancestors(s, depth) < 0 || a3s_scan_add_rule(s, A3S_FS_PROTECT, &st) < 0)
        return -1;
    (void)type;
    if (S_ISREG(st.st_mode))
        return a3s_scan_read_gitdir(s, dfd, name, s->len - strlen(name) - 1);
    return 0;
}

/* Walk rel (relative to the workspace) as the kernel would for host git, one component
 * at a time without following links. The directories on the way are held and the git
 * directory itself protected, each with the identity seen here; a link on the way, a
 * missing target (the command could create it) or the workspace itself is refused.
 * Returns 1 when ".." leaves the workspace (the caller resolves the path itself). */
static int gitdir_walk(struct scan *s, const char *rel, const char *target)
{
    char *copy = strdup(rel);
    char *abs = malloc(s->base + strlen(rel) + 2);
    int *fds = calloc(strlen(rel) + 2, sizeof *fds);
    size_t *lens = calloc(strlen(rel) + 2, sizeof *lens);
    if (!copy || !abs || !fds || !lens) {
        free(copy), free(abs), free(fds), free(lens);
        return a3s_scan_oom(s);
    }
    memcpy(abs, s->ws, s->base);
    abs[s->base] = '\0';
    size_t depth = 0, len = s->base;
    fds[0] = s->wsfd;
    lens[0] = len;
    struct stat st = {0};
    int rc = 0;
    char *save = NULL;
    for (char *c = strtok_r(copy, "/", &save); c && rc == 0; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, "."))
            continue;
        if (!strcmp(c, "..")) {
            if (depth == 0) {
                rc = 1;
                break;
            }
            close(fds[depth--]);
            len = lens[depth];
            abs[len] = '\0';
            continue;
        }
        if (fstatat(fds[depth], c, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            rc = a3s_fail_errno(s->err, A3S_ERR_POLICY, errno,
                                "workspace scan: git directory '%s' named by %s is missing or "
                                "unusable inside the workspace (a command could create it); "
                                "fix or remove that .git file",
                                target, s->path);
            break;
        }
        if (S_ISLNK(st.st_mode)) {
            rc = a3s_fail(s->err, A3S_ERR_POLICY,
                          "refusing a symbolic link on the way to git directory '%s' named by %s",
                          target, s->path);
            break;
        }
        int fd = openat(fds[depth], c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            rc = a3s_scan_io_fail(s, errno, "open git directory");
            break;
        }
        fds[++depth] = fd;
        abs[len++] = '/';
        memcpy(abs + len, c, strlen(c) + 1);
        len += strlen(c);
        lens[depth] = len;
    }
    if (rc == 0 && depth == 0)
        /* Its hooks would be ordinary writable workspace files: refuse. */
        rc = a3s_fail(s->err, A3S_ERR_POLICY,
                      "workspace scan: git directory named by %s is the workspace itself", s->path);
    for (size_t d = 1; rc == 0 && d <= depth; d++) {
        struct stat ds;
        if (fstat(fds[d], &ds) < 0) {
            rc = a3s_scan_io_fail(s, errno, "stat git directory");
            break;
        }
        if (d < depth)
            rc = a3s_scan_push_found(s, &s->holds, &s->nholds, &s->capholds, A3S_FS_RW, abs,
                                     lens[d], &ds);
        else if ((rc = a3s_scan_push_found(s, &s->rules, &s->nrules, &s->caprules,
                                           A3S_FS_PROTECT, abs, lens[d], &ds)) == 0 &&
                 a3s_strv_push(&s->gitdirs, abs + s->base + 1) < 0)
            rc = a3s_scan_oom(s);
    }
    for (size_t d = 1; d <= depth; d++)
        close(fds[d]);
    free(copy), free(abs), free(fds), free(lens);
    return rc;
}

/* `.git` (any case) is a regular file: protect the directory its "gitdir: PATH" line
 * names when that lies inside the workspace (outside, everything is read-only). */
/* The `.git` file `name` in the directory open as dfd, whose path is s->path[0..dir_len]
 * (the workspace itself for the top one). */
int a3s_scan_read_gitdir(struct scan *s, int dfd, const char *name, size_t dir_len)
{
    /* O_NONBLOCK: a FIFO swapped in cannot hang the scan; fstat rejects it below. */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT)
            return 0;
        return a3s_scan_io_fail(s, errno, "open");
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int saved = errno;
        close(fd);
        return a3s_scan_io_fail(s, saved, "stat");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    char buf[GITDIR_MAX + 1];
    size_t n = 0;
    while (n < GITDIR_MAX) {
        ssize_t got = a3s_read_retry(fd, buf + n, GITDIR_MAX - n);
        if (got < 0) {
            int saved = errno;
            close(fd);
            return a3s_scan_io_fail(s, saved, "read");
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (strncmp(buf, "gitdir:", 7) != 0)
        return 0;
    char *target = buf + 7;
    target += strspn(target, " \t");
    size_t tl = strlen(target);
    while (tl > 0 && (target[tl - 1] == ' ' || target[tl - 1] == '\t'))
        target[--tl] = '\0';
    if (tl == 0)
        return 0;

    /* Where host git will look, walked by fd from the workspace so that what is
     * protected is the very directory (and chain of directories) git will use. A
     * relative target is relative to the directory of the .git file. */
    const char *rel = NULL;
    char *real = NULL, *joined = NULL;
    size_t wl = strlen(s->ws);
    if (target[0] != '/') {
        size_t dl = dir_len > s->base ? dir_len - s->base - 1 : 0; /* its dir, relative */
        if (asprintf(&joined, "%.*s%s%s", (int)dl, s->path + s->base + 1, dl ? "/" : "",
                     target) < 0)
            return a3s_scan_oom(s);
        rel = joined;
    } else if (s->base == 0) {
        rel = target + 1;
    } else if (strncmp(target, s->ws, wl) == 0 && (target[wl] == '/' || target[wl] == '\0')) {
        rel = target + wl + (target[wl] == '/');
    }
    int rc = rel ? gitdir_walk(s, rel, target) : 1;
    if (rc == 1) {
        /* Outside the workspace as written: everything there is read-only, unless a link
         * outside leads back in. */
        char *abs = NULL;
        if (target[0] == '/')
            abs = strdup(target);
        else if (asprintf(&abs, "%s/%s", s->ws, joined) < 0)
            abs = NULL;
        if (!abs) {
            free(joined);
            return a3s_scan_oom(s);
        }
        real = realpath(abs, NULL);
        int saved = errno;
        free(abs);
        errno = saved;
        if (!real) {
            free(joined);
            if (saved == ENOENT || saved == ENOTDIR)
                return 0;
            return a3s_fail_errno(s->err, A3S_ERR_POLICY, saved,
                                  "workspace scan: cannot resolve git directory '%s' named by %s",
                                  target, s->path);
        }
        rc = 0;
        if (a3s_path_within(real, s->ws))
            rc = gitdir_walk(s, real[s->base + 1] ? real + s->base + 1 : ".", target);
        if (rc == 1)
            rc = 0;
    }
    free(real);
    free(joined);
    return rc;
}
