/* The running program inside its own workspace: what a command could replace so that the
 * caller's next invocation runs the command's code on the host. Every path by which the
 * program is reached (as invoked, through each link, its real file, the policy
 * directories found next to it) is walked as the kernel walks it; each time the walk
 * stands in the workspace (by identity: a bind-mount alias counts), the entry it steps
 * into is protected in every run (read-only, a mount point: neither written, removed nor
 * renamed; pinned when missing). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox_int.h"
#include "util.h"

#define MAX_LINKS 40

static bool is_ws(const a3s_sandbox *sb, const char *dir)
{
    struct stat st;
    return stat(dir, &st) == 0 && st.st_dev == sb->ws_st.st_dev && st.st_ino == sb->ws_st.st_ino;
}

static bool strv_has(const a3s_strv *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (!strcmp(l->v[i], s))
            return true;
    return false;
}

static int protect(a3s_sandbox *sb, const char *name, bool dir, a3s_error *err)
{
    a3s_strv *l = dir ? &sb->also_dirs : &sb->also_files;
    if (strv_has(l, name))
        return 0;
    return a3s_strv_push(l, name) < 0 ? a3s_fail(err, A3S_ERR_INTERNAL, "out of memory") : 0;
}

/* A walk that cannot finish cannot say what to protect: every run is refused. */
static int give_up(a3s_sandbox *sb, const char *path, const char *why, a3s_error *err)
{
    if (sb->ws_refusal)
        return 0;
    if (asprintf(&sb->ws_refusal,
                 "cannot tell whether the workspace %s holds the running program (%s: %s): "
                 "a command could replace it for the next run",
                 sb->workspace, path, why) < 0) {
        sb->ws_refusal = NULL;
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    return 0;
}

/* Prepend the components of s (a link's target) to the remaining path in rest. */
static int prepend(char *rest, size_t cap, const char *s)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s%s%s", s, rest[0] ? "/" : "", rest);
    if (n < 0 || (size_t)n >= sizeof tmp || (size_t)n >= cap)
        return -1;
    memcpy(rest, tmp, (size_t)n + 1);
    return 0;
}

/* Pop the first component of rest into comp (empty components skipped). */
static bool next_comp(char *rest, char comp[NAME_MAX + 1])
{
    char *p = rest;
    while (*p == '/')
        p++;
    if (!*p)
        return false;
    size_t n = strcspn(p, "/");
    if (n > NAME_MAX)
        n = NAME_MAX; /* such a name does not exist: the walk ends there */
    memcpy(comp, p, n);
    comp[n] = '\0';
    p += strcspn(p, "/");
    memmove(rest, p, strlen(p) + 1);
    return true;
}

int a3s_sandbox_guard_path(a3s_sandbox *sb, const char *path, bool final_dir, a3s_error *err)
{
    if (!path || !path[0])
        return give_up(sb, "(none)", "the program's path is unknown", err);
    char cur[PATH_MAX] = "/", rest[PATH_MAX], comp[NAME_MAX + 1];
    /* From the root, the working directory's components first: a relative spelling from
     * below the workspace passes through it too. */
    if (path[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return give_up(sb, path, "no working directory", err);
        if (snprintf(rest, sizeof rest, "%s/%s", cwd, path) >= (int)sizeof rest)
            return give_up(sb, path, "path too long", err);
    } else if (snprintf(rest, sizeof rest, "%s", path) >= (int)sizeof rest) {
        return give_up(sb, path, "path too long", err);
    }
    int links = 0;
    while (next_comp(rest, comp)) {
        if (!strcmp(comp, "."))
            continue;
        if (!strcmp(comp, "..")) {
            /* cur is a real directory (links replaced as met): its parent is lexical. */
            char *slash = strrchr(cur, '/');
            if (slash && slash != cur)
                *slash = '\0';
            else
                snprintf(cur, sizeof cur, "/");
            continue;
        }
        bool last = !rest[strspn(rest, "/")];
        if (is_ws(sb, cur) && protect(sb, comp, !last || final_dir, err) < 0)
            return -1;
        char cand[PATH_MAX];
        if (snprintf(cand, sizeof cand, "%s%s%s", cur, strcmp(cur, "/") ? "/" : "", comp) >=
            (int)sizeof cand)
            return give_up(sb, path, "path too long", err);
        struct stat st;
        if (lstat(cand, &st) < 0)
            return 0; /* the walk ends where the caller's would: protected above if in it */
        if (S_ISLNK(st.st_mode)) {
            char target[PATH_MAX];
            ssize_t n = readlink(cand, target, sizeof target - 1);
            if (n < 0)
                return give_up(sb, cand, "unreadable link", err);
            if (++links > MAX_LINKS)
                return 0; /* ELOOP for the caller too */
            target[n] = '\0';
            if (prepend(rest, sizeof rest, target) < 0)
                return give_up(sb, path, "path too long", err);
            if (target[0] == '/')
                snprintf(cur, sizeof cur, "/");
            continue;
        }
        memcpy(cur, cand, strlen(cand) + 1);
    }
    return 0;
}

bool a3s_sandbox_guarded(const a3s_sandbox *sb)
{
    return sb->also_dirs.n || sb->also_files.n;
}

int a3s_sandbox_guard_home_dir(a3s_sandbox *sb, const char *image, a3s_error *err)
{
    if (!image || image[0] != '/')
        return give_up(sb, "(none)", "the running program cannot be located", err);
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s", image) >= (int)sizeof dir)
        return 0;
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    if (!is_ws(sb, dir[0] ? dir : "/") || sb->ws_refusal)
        return 0;
    /* Its siblings (the library, the Lua module, the policy directory of a build or an
     * install) would be the command's to replace: no run uses that directory. */
    if (asprintf(&sb->ws_refusal,
                 "the workspace %s is the directory of the running program %s: the command "
                 "could replace what is installed beside it; choose another directory (-w DIR)",
                 sb->workspace, image) < 0) {
        sb->ws_refusal = NULL;
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    return 0;
}

bool a3s_sandbox_ws_holds(const a3s_sandbox *sb, const char *path)
{
    char *p = path ? realpath(path, NULL) : NULL;
    if (!p)
        return false;
    bool held = false;
    for (;;) {
        if (is_ws(sb, p[0] ? p : "/")) {
            held = true;
            break;
        }
        char *slash = strrchr(p, '/');
        if (!slash || !p[0])
            break;
        *slash = '\0';
    }
    free(p);
    return held;
}
