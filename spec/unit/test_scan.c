/* Unit tests for engine/scan.c: workspace discovery (protected names, gitdir, secrets,
 * hard links, package-store credential aliases, limits, symlinks). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pin.h"
#include "plan.h"
#include "scan.h"
#include "stale.h"
#include "tap.h"

static char root[PATH_MAX];

/* ---------------------------------------------------------------- fixtures */

static void fmt_path(char *out, const char *fmt, ...) A3S_PRINTF(2, 3);
static void fmt_path(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) {
        fprintf(stderr, "test path too long\n");
        exit(2);
    }
}

static void die(const char *what)
{
    perror(what);
    exit(2);
}

/* mkdir -p of dir/rel */
static void mkdirs(const char *dir, const char *rel)
{
    char p[PATH_MAX];
    fmt_path(p, "%s/%s", dir, rel);
    for (char *c = p + strlen(dir) + 1;; c++) {
        if (*c == '/' || *c == '\0') {
            char save = *c;
            *c = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                die(p);
            *c = save;
            if (!save)
                break;
        }
    }
}

static void put(const char *dir, const char *rel, const char *text)
{
    char p[PATH_MAX];
    fmt_path(p, "%s/%s", dir, rel);
    char *slash = strrchr(rel, '/');
    if (slash) {
        char parent[PATH_MAX];
        fmt_path(parent, "%.*s", (int)(slash - rel), rel);
        mkdirs(dir, parent);
    }
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) < 0)
        die(p);
}

/* Hard link dir/rel -> target (absolute), creating parents. */
static void hardlink(const char *target, const char *dir, const char *rel)
{
    char p[PATH_MAX];
    fmt_path(p, "%s/%s", dir, rel);
    char *slash = strrchr(rel, '/');
    if (slash) {
        char parent[PATH_MAX];
        fmt_path(parent, "%.*s", (int)(slash - rel), rel);
        mkdirs(dir, parent);
    }
    if (link(target, p) < 0)
        die(p);
}

static void softlink(const char *target, const char *dir, const char *rel)
{
    char p[PATH_MAX];
    fmt_path(p, "%s/%s", dir, rel);
    if (symlink(target, p) < 0)
        die(p);
}

static void new_dir(char *out, const char *tag)
{
    static int seq;
    fmt_path(out, "%s/%s-%d", root, tag, ++seq);
    if (mkdir(out, 0755) < 0)
        die(out);
}

static void add_names(a3s_name_list *l, const char *const *v)
{
    a3s_error err = {0};
    for (; *v; v++)
        if (a3s_plan_add_name(l, *v, "test", 1, &err) < 0) {
            fprintf(stderr, "%s\n", err.msg);
            exit(2);
        }
}

/* A plan with the baseline's workspace names. */
static a3s_plan *new_plan(const char *ws)
{
    static const char *const dirs[] = {".git",    ".a3s",    ".agents", ".codex",
                                       ".claude", ".vscode", ".idea",   NULL};
    static const char *const files[] = {".gitmodules", ".mcp.json",     ".ripgreprc",
                                        ".bashrc",     ".bash_profile", ".zshrc",
                                        ".zprofile",   ".profile",      NULL};
    static const char *const secrets[] = {".env", NULL};
    static const char *const skip[] = {".git", "node_modules", "target", NULL};
    char scratch[PATH_MAX], home[PATH_MAX], tmp[PATH_MAX];
    a3s_error err = {0};
    a3s_plan *p = a3s_plan_new();
    if (!p)
        die("a3s_plan_new");
    fmt_path(scratch, "%s/scratch", root);
    fmt_path(home, "%s/home", root);
    fmt_path(tmp, "%s/tmp", root);
    if (a3s_plan_set_roots(p, ws, scratch, home, tmp, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        exit(2);
    }
    add_names(&p->protect_dirs, dirs);
    add_names(&p->protect_files, files);
    add_names(&p->secret_prefixes, secrets);
    add_names(&p->scan_skip, skip);
    return p;
}

/* Number of the scan's rules of `kind` for ws/rel (every scan rule must be discovered+optional). */
static int rules_for(const a3s_scan_result *res, enum a3s_fs_kind kind, const char *ws, const char *rel)
{
    char want[PATH_MAX];
    fmt_path(want, "%s/%s", ws, rel);
    int n = 0;
    for (size_t i = 0; i < res->nrules; i++)
        if (res->rules[i].kind == kind && strcmp(res->rules[i].path, want) == 0)
            n++;
    return n;
}

static bool masked(const a3s_scan_result *res, const char *ws, const char *rel)
{
    return rules_for(res, A3S_FS_MASK, ws, rel) == 1;
}

static bool protected(const a3s_scan_result *res, const char *ws, const char *rel)
{
    return rules_for(res, A3S_FS_PROTECT, ws, rel) == 1;
}

/* Rules whose path contains `part`. */
static int rules_containing(const a3s_scan_result *res, const char *part)
{
    int n = 0;
    for (size_t i = 0; i < res->nrules; i++)
        if (strstr(res->rules[i].path, part))
            n++;
    return n;
}

static bool all_discovered(const a3s_scan_result *res)
{
    for (size_t i = 0; i < res->nrules; i++)
        if (!res->rules[i].discovered || !res->rules[i].optional || !res->rules[i].prov.file ||
            strcmp(res->rules[i].prov.file, "<scan>") != 0)
            return false;
    return true;
}

static bool sv_has(const a3s_strv *sv, const char *s)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->v[i], s) == 0)
            return true;
    return false;
}

static size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    if (!d)
        return (size_t)-1;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

/* ---------------------------------------------------------------- tests */

static void test_case_variant_protected(void)
{
    char ws[PATH_MAX];
    new_dir(ws, "ws");
    mkdirs(ws, ".GIT");
    put(ws, ".MCP.JSON", "original");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};

    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan succeeds: %s", err.msg);
    ok(protected(&r, ws, ".GIT"), ".GIT directory is protected");
    ok(protected(&r, ws, ".MCP.JSON"), ".MCP.JSON file is protected");
    ok(r.nrules == 2, "exactly two rules (got %zu)", r.nrules);
    ok(all_discovered(&r), "scan rules are discovered, optional, provenance <scan>");
    /* A variant does not stand for the canonical spelling: that one is pinned too. */
    ok(sv_has(&r.missing_dirs, ".git") && sv_has(&r.missing_dirs, ".a3s") && r.missing_dirs.n == 7,
       "missing_dirs lists all seven canonical directories, .git too (%zu)", r.missing_dirs.n);
    ok(sv_has(&r.missing_files, ".mcp.json") && sv_has(&r.missing_files, ".profile") &&
           r.missing_files.n == 8,
       "missing_files lists all eight canonical files, .mcp.json too (%zu)", r.missing_files.n);
    ok(a3s_scan_find(&r, r.rules[0].path) && a3s_scan_find(&r, r.rules[1].path),
       "both variants carry the identity the scan saw");
    ok(r.entries == 2, "two entries visited (got %llu)", (unsigned long long)r.entries);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);
}

static void test_missing_all(void)
{
    char ws[PATH_MAX];
    new_dir(ws, "ws");
    put(ws, "README", "x");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan of a plain workspace: %s", err.msg);
    ok(r.missing_dirs.n == 7 && strcmp(r.missing_dirs.v[0], ".git") == 0 &&
           strcmp(r.missing_dirs.v[6], ".idea") == 0,
       "all protected directories missing, in declared order");
    ok(r.missing_files.n == 8 && strcmp(r.missing_files.v[0], ".gitmodules") == 0,
       "all protected files missing");
    ok(r.nrules == 0, "no rules for a plain workspace");
    a3s_scan_result_free(&r);
    ok(r.missing_dirs.n == 0 && r.missing_dirs.v == NULL, "result free clears the lists");
    a3s_plan_free(p);
}

static void test_gitdir(void)
{
    char ws[PATH_MAX], outside[PATH_MAX], other[PATH_MAX], text[PATH_MAX + 16];
    a3s_scan_result r;
    a3s_error err = {0};

    new_dir(other, "outside");
    put(other, "ordinary", "o");
    fmt_path(outside, "%s/ordinary", other);

    /* Relative gitdir inside the workspace: protected and treated like .git. */
    new_dir(ws, "ws");
    put(ws, ".git", "gitdir: sub/gitdir\n");
    mkdirs(ws, "sub/gitdir/objects");
    put(ws, "sub/gitdir/.env.inside", "s");
    hardlink(outside, ws, "sub/gitdir/objects/pack");
    a3s_plan *p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan with a .git file: %s", err.msg);
    ok(protected(&r, ws, ".git"), "the .git file itself is protected");
    ok(protected(&r, ws, "sub/gitdir"), "the gitdir target sub/gitdir is protected");
    ok(rules_containing(&r, "sub/gitdir/") == 1 && masked(&r, ws, "sub/gitdir/.env.inside"),
       "the git directory is walked for secrets only (its linked objects stay readable)");
    ok(!sv_has(&r.missing_dirs, ".git"), ".git is not missing");
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    /* CRLF, absolute path: the target, its parent held. */
    new_dir(ws, "ws");
    mkdirs(ws, "real/wt");
    fmt_path(text, "gitdir:   %s/real/wt \r\n", ws);
    put(ws, ".git", text);
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan with an absolute gitdir: %s", err.msg);
    ok(protected(&r, ws, ".git") && protected(&r, ws, "real/wt"),
       "absolute gitdir inside the workspace: real/wt protected");
    ok(r.nholds == 1 && strstr(r.holds[0].path, "/real") && r.holds[0].dir,
       "its parent directory is held (%zu holds)", r.nholds);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    /* A variant (.GIT) is not read by host git here (the directory does not fold case):
     * what it names is no git directory, and its secrets stay masked. */
    new_dir(ws, "ws");
    put(ws, "app/conf/.env", "s");
    put(ws, ".GIT", "gitdir: app\n");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0 && !protected(&r, ws, "app") &&
           masked(&r, ws, "app/conf/.env"),
       "a .GIT variant naming a directory hides nothing: %s", err.msg);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    /* A link on the way inside the workspace: a command could re-point it, refused. */
    new_dir(ws, "ws");
    mkdirs(ws, "real/wt");
    softlink("real", ws, "link");
    fmt_path(text, "gitdir: %s/link/wt\n", ws);
    put(ws, ".git", text);
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "symbolic link"),
       "a gitdir through a workspace symlink is refused: %s", err.msg);
    a3s_plan_free(p);

    /* Outside the workspace (read-only anyway) or absent: no rule. */
    new_dir(ws, "ws");
    fmt_path(text, "gitdir: %s\n", other);
    put(ws, ".git", text);
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0 && r.nrules == 1 && protected(&r, ws, ".git"),
       "a gitdir outside the workspace adds no rule (%zu rules): %s", r.nrules, err.msg);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    new_dir(ws, "ws");
    put(ws, ".git", "gitdir: does/not/exist\n");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "could create it"),
       "a gitdir inside the workspace that does not exist is refused: %s", err.msg);
    a3s_plan_free(p);

    new_dir(ws, "ws");
    put(ws, ".git", "not a pointer\ngitdir: sub\n");
    mkdirs(ws, "sub");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0 && r.nrules == 1, "only the first line counts: %s",
       err.msg);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    /* The workspace itself as git directory would leave its hooks writable. */
    new_dir(ws, "ws");
    put(ws, ".git", "gitdir: .\n");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && err.code == A3S_ERR_POLICY &&
           strstr(err.msg, "workspace itself"),
       "gitdir naming the workspace itself is refused: %s", err.msg);
    ok(r.nrules == 0, "a failed scan adds nothing");
    a3s_plan_free(p);
}

static void test_nested_secrets(void)
{
    char ws[PATH_MAX];
    new_dir(ws, "ws");
    put(ws, ".env", "top");
    put(ws, "src/config/.ENV.local", "a");
    put(ws, "src/config/.env.secret", "b");
    put(ws, "src/config/env.not", "c");
    put(ws, "node_modules/package/.env.secret", "d");
    put(ws, "NODE_MODULES/package/.env.secret", "d");
    put(ws, "packages/app/node_modules/x/.env", "d");
    put(ws, "target/debug/.env.secret", "e");
    put(ws, ".git/.env.secret", "f");
    put(ws, "sub/.git/.env.secret", "f");
    put(ws, ".a3s/.env", "g");
    put(ws, ".env.d/inner/.env", "h");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};

    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan: %s", err.msg);
    ok(masked(&r, ws, ".env"), ".env is masked");
    ok(masked(&r, ws, "src/config/.ENV.local"), "nested case variant .ENV.local is masked");
    ok(masked(&r, ws, "src/config/.env.secret"), "nested .env.secret is masked");
    ok(masked(&r, ws, ".a3s/.env"), "protected directories are walked for secrets");
    ok(masked(&r, ws, ".env.d"), "a secret-named directory is masked");
    ok(rules_containing(&r, ".env.d/") == 0, "nothing below a masked directory gets a rule");
    ok(rules_containing(&r, "node_modules") == 0 && rules_containing(&r, "NODE_MODULES") == 0,
       "node_modules (any case, any depth) is not searched for secrets");
    ok(rules_containing(&r, "/target/") == 0, "target is not searched for secrets");
    ok(rules_containing(&r, ".git/") == 0, ".git (also nested) is not searched");
    ok(rules_containing(&r, "env.not") == 0, "a name merely containing env is not masked");
    ok(protected(&r, ws, ".git") && protected(&r, ws, ".a3s"), "top-level .git/.a3s protected");
    ok(protected(&r, ws, "sub/.git"), "a nested .git is protected too");
    ok(r.nrules == 8, "exactly eight rules (got %zu)", r.nrules);
    bool sorted = true;
    for (size_t i = 1; i < r.nrules; i++)
        if (strcmp(r.rules[i - 1].path, r.rules[i].path) >= 0)
            sorted = false;
    ok(sorted, "discovered rules are sorted by path, one per path");
    a3s_scan_result_free(&r);
    a3s_plan_free(p);
}

static void test_hardlinks(void)
{
    char ws[PATH_MAX], other[PATH_MAX], outside[PATH_MAX], source[PATH_MAX];
    new_dir(other, "outside");
    put(other, "ordinary", "o");
    put(other, "source", "s");
    fmt_path(outside, "%s/ordinary", other);
    fmt_path(source, "%s/source", other);
    new_dir(ws, "ws");
    hardlink(source, ws, "src/linked");
    hardlink(outside, ws, "node_modules/linked");
    hardlink(outside, ws, "target/linked");
    hardlink(outside, ws, ".a3s/linked");
    hardlink(outside, ws, ".git/linked");
    put(ws, "src/single", "s");
    softlink(outside, ws, "src/soft");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};

    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan: %s", err.msg);
    ok(masked(&r, ws, "src/linked"), "source hard link src/linked (nlink 2) is masked");
    ok(masked(&r, ws, ".a3s/linked"), "a hard link in a protected dir is masked (read-only is "
                                     "not unreadable)");
    ok(masked(&r, ws, "node_modules/linked") && masked(&r, ws, "target/linked") &&
           rules_containing(&r, "linked") == 4,
       "its aliases in node_modules and target are masked with it; not in .git");
    ok(protected(&r, ws, ".git") && protected(&r, ws, ".a3s") && r.nrules == 6,
       "only the two protected dirs and the four links have rules (%zu)", r.nrules);
    ok(rules_containing(&r, "single") == 0 && rules_containing(&r, "soft") == 0,
       "single-link files and symlinks are not masked");
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    /* A hard-linked protected top-level file: one rule, the stronger MASK. */
    new_dir(ws, "ws");
    hardlink(outside, ws, ".bashrc");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan: %s", err.msg);
    ok(masked(&r, ws, ".bashrc") && rules_for(&r, A3S_FS_PROTECT, ws, ".bashrc") == 0,
       "a hard-linked protected file gets MASK only (one kind per path)");
    ok(!sv_has(&r.missing_files, ".bashrc"), "and is not missing");
    a3s_scan_result_free(&r);
    a3s_plan_free(p);
}

static void test_credential_aliases(void)
{
    char ws[PATH_MAX], other[PATH_MAX], outside[PATH_MAX], env[PATH_MAX], tok[PATH_MAX],
        src[PATH_MAX];
    new_dir(other, "outside");
    put(other, "ordinary", "o");
    fmt_path(outside, "%s/ordinary", other);
    new_dir(ws, "ws");
    put(ws, ".env", "workspace-secret");
    fmt_path(env, "%s/.env", ws);
    hardlink(env, ws, "node_modules/linked-secret");
    hardlink(env, ws, "target/linked-secret");
    hardlink(env, ws, "packages/app/node_modules/deep/linked-secret");
    hardlink(env, ws, ".a3s/node_modules/linked-secret");
    hardlink(env, ws, ".git/node_modules/linked-secret");
    hardlink(outside, ws, "node_modules/ordinary");
    put(ws, ".env.d/token", "t");
    fmt_path(tok, "%s/.env.d/token", ws);
    hardlink(tok, ws, "target/token-alias");
    put(ws, "src/shared", "s");
    fmt_path(src, "%s/src/shared", ws);
    hardlink(src, ws, "node_modules/shared-alias");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};

    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan: %s", err.msg);
    ok(masked(&r, ws, ".env"), ".env masked");
    ok(masked(&r, ws, "node_modules/linked-secret"), "node_modules/linked-secret masked");
    ok(masked(&r, ws, "target/linked-secret"), "target/linked-secret masked");
    ok(masked(&r, ws, "packages/app/node_modules/deep/linked-secret"),
       "an alias in a nested package store is masked");
    ok(masked(&r, ws, ".a3s/node_modules/linked-secret"),
       "an alias in a package store inside a protected directory is masked");
    ok(rules_containing(&r, ".git/") == 0, "nothing inside .git");
    ok(rules_for(&r, A3S_FS_MASK, ws, "node_modules/ordinary") == 0,
       "an alias of an ordinary outside file in node_modules is not masked");
    ok(masked(&r, ws, "target/token-alias"), "an alias of a file inside a masked dir is masked");
    ok(masked(&r, ws, "src/shared") && masked(&r, ws, "node_modules/shared-alias"),
       "a source hard link and its package-store alias are both masked");
    a3s_scan_result_free(&r);
    a3s_plan_free(p);
}

static void test_symlinks_refused(void)
{
    char ws[PATH_MAX], other[PATH_MAX];
    a3s_scan_result r;
    a3s_error err = {0};
    new_dir(other, "outside");

    new_dir(ws, "ws");
    softlink(other, ws, ".git");
    a3s_plan *p = new_plan(ws);
    a3s_plan_add_fs(p, A3S_FS_RO, "/usr", false, false, "policy.lua", 3, &err);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && err.code == A3S_ERR_POLICY &&
           strstr(err.msg, "symbolic link") && strstr(err.msg, "protected workspace path"),
       "a symlinked .git fails closed: %s", err.msg);
    ok(p->nfs == 1 && r.nrules == 0, "the plan is unchanged after a failed scan");
    ok(r.missing_dirs.n == 0 && r.missing_files.n == 0, "the result is empty on failure");
    a3s_plan_free(p);

    new_dir(ws, "ws");
    put(other, "secret", "outside-secret");
    char target[PATH_MAX];
    fmt_path(target, "%s/secret", other);
    softlink(target, ws, ".env");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "symbolic link") &&
           strstr(err.msg, "secret workspace path"),
       "a symlinked .env fails closed: %s", err.msg);
    a3s_plan_free(p);

    new_dir(ws, "ws");
    mkdirs(ws, "src");
    softlink(target, ws, "src/.Env.local");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "symbolic link"),
       "a nested symlinked .Env.local fails closed: %s", err.msg);
    a3s_plan_free(p);

    new_dir(ws, "ws");
    softlink("/nonexistent", ws, ".MCP.json");
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "symbolic link"),
       "a dangling symlinked .MCP.json fails closed: %s", err.msg);
    a3s_plan_free(p);
}

static void test_symlinked_dirs_not_followed(void)
{
    char ws[PATH_MAX], other[PATH_MAX];
    new_dir(other, "outside");
    put(other, ".env", "outside-secret");
    put(other, "deep/.env.local", "outside-secret");
    new_dir(ws, "ws");
    softlink(other, ws, "linked-dir");
    mkdirs(ws, "src");
    softlink(other, ws, "src/also-linked");
    softlink("..", ws, "src/loop");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan with symlinked directories: %s", err.msg);
    ok(r.nrules == 0, "no rule for anything reached through a symlink (%zu rules)", r.nrules);
    ok(r.entries == 4, "symlinks are entries, their targets are not walked (%llu)",
       (unsigned long long)r.entries);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);
}

static void test_depth_limit(void)
{
    char ws[PATH_MAX], rel[PATH_MAX];
    a3s_scan_result r;
    a3s_error err = {0};

    new_dir(ws, "ws");
    rel[0] = '\0';
    for (int i = 0; i < 64; i++)
        strcat(rel, i ? "/d" : "d");
    mkdirs(ws, rel);
    a3s_plan *p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "64 nested directories are within depth 64: %s",
       err.msg);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    new_dir(ws, "ws");
    strcat(rel, "/d");
    mkdirs(ws, rel);
    p = new_plan(ws);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && err.code == A3S_ERR_POLICY &&
           strstr(err.msg, "depth limit 64 exceeded at ") && strstr(err.msg, "/d/d/d"),
       "65 nested directories exceed depth 64: %.120s", err.msg);
    a3s_plan_free(p);

    /* The limit also holds inside package stores searched for aliases. */
    new_dir(ws, "ws");
    put(ws, ".env", "s");
    char env[PATH_MAX];
    fmt_path(env, "%s/.env", ws);
    hardlink(env, ws, "node_modules/a/b/c/alias");
    p = new_plan(ws);
    p->limits.scan_depth = 3;
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "depth limit 3"),
       "depth limit applies to the package-store search: %s", err.msg);
    a3s_plan_free(p);
}

static void test_entry_limit(void)
{
    char ws[PATH_MAX], name[32];
    a3s_scan_result r;
    a3s_error err = {0};
    new_dir(ws, "ws");
    for (int i = 0; i < 6; i++) {
        snprintf(name, sizeof name, "dir/f%d", i);
        put(ws, name, "x");
    }
    a3s_plan *p = new_plan(ws);
    p->limits.scan_entries = 7; /* dir + six files */
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0 && r.entries == 7,
       "exactly at the entry limit is fine (%llu entries): %s", (unsigned long long)r.entries,
       err.msg);
    a3s_scan_result_free(&r);
    p->limits.scan_entries = 6;
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && err.code == A3S_ERR_POLICY &&
           strstr(err.msg, "entry limit 6 exceeded"),
       "one entry over the limit fails: %s", err.msg);
    a3s_plan_free(p);
}

/* The backend's answer to "is this name a pin": the pin records in the state root. */
static bool held_pin(void *ud, int wsfd, const char *name)
{
    const a3s_plan *p = ud;
    return a3s_pins_held(wsfd, a3s_stale_root(p->tmp), name);
}

static void test_held_pins(void)
{
    char ws[PATH_MAX];
    new_dir(ws, "ws");
    a3s_strv d = {0}, f = {0};
    a3s_strv_push(&d, ".git");
    a3s_strv_push(&f, ".mcp.json");
    a3s_pins *pins = NULL;
    a3s_error err = {0};
    ok(a3s_pins_acquire(ws, &d, &f, &pins, &err) == 0, "pins acquired: %s", err.msg);

    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_scan_hooks hooks = {.held = held_pin, .ud = p};
    ok(a3s_scan_workspace(p, -1, &hooks, &r, &err) == 0, "scan: %s", err.msg);
    ok(sv_has(&r.missing_dirs, ".git") && sv_has(&r.missing_files, ".mcp.json"),
       "pins held by this process are reported as missing (to be shared)");
    ok(r.nrules == 0, "and get no PROTECT rule of their own (%zu rules)", r.nrules);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);

    /* A second holder shares them; the first release keeps them. */
    a3s_pins *second = NULL;
    ok(a3s_pins_acquire(ws, &d, &f, &second, &err) == 0 && a3s_pins_paths(second)[0] &&
           a3s_pins_paths(second)[1],
       "a second execution shares both pins");
    a3s_pins_release(pins);
    a3s_pins_release(second);
    ok(count_entries(ws) == 0, "the last release removes them");
    a3s_strv_free(&d);
    a3s_strv_free(&f);
}

static void test_declared_rules_respected(void)
{
    char ws[PATH_MAX], envp[PATH_MAX], gitp[PATH_MAX];
    new_dir(ws, "ws");
    put(ws, ".env", "s");
    mkdirs(ws, ".git");
    fmt_path(envp, "%s/.env", ws);
    fmt_path(gitp, "%s/.git", ws);
    a3s_plan *p = new_plan(ws);
    a3s_error err = {0};
    a3s_plan_add_fs(p, A3S_FS_MASK, envp, true, false, "policy.lua", 7, &err);
    a3s_plan_add_fs(p, A3S_FS_PROTECT, gitp, true, false, "policy.lua", 8, &err);
    a3s_scan_result r;
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) == 0, "scan: %s", err.msg);
    ok(r.nrules == 0 && p->nfs == 2,
       "declared MASK .env / PROTECT .git are not duplicated (%zu scan rules)", r.nrules);
    a3s_scan_result_free(&r);
    a3s_plan_free(p);
}

static void test_bad_input(void)
{
    char ws[PATH_MAX];
    new_dir(ws, "ws");
    a3s_plan *p = new_plan(ws);
    a3s_scan_result r;
    a3s_error err = {0};
    static const char *const empty[] = {"", NULL};
    add_names(&p->secret_prefixes, empty);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && err.code == A3S_ERR_POLICY,
       "an empty secret prefix (would mask everything) is refused: %s", err.msg);
    a3s_plan_free(p);

    char missing[PATH_MAX];
    fmt_path(missing, "%s/does-not-exist", root);
    p = new_plan(missing);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0 && strstr(err.msg, "cannot open workspace"),
       "a missing workspace fails: %s", err.msg);
    a3s_plan_free(p);

    char link[PATH_MAX];
    fmt_path(link, "%s/ws-link", root);
    if (symlink(ws, link) < 0)
        die(link);
    p = new_plan(link);
    ok(a3s_scan_workspace(p, -1, NULL, &r, &err) < 0, "a symlinked workspace path is refused: %s", err.msg);
    a3s_plan_free(p);
}

int main(void)
{
    char tmpl[] = "/tmp/a3s-test-scan-XXXXXX";
    if (!mkdtemp(tmpl) || !realpath(tmpl, root))
        die("mkdtemp");
    int fds = (int)count_entries("/proc/self/fd");

    test_case_variant_protected();
    test_missing_all();
    test_gitdir();
    test_nested_secrets();
    test_hardlinks();
    test_credential_aliases();
    test_symlinks_refused();
    test_symlinked_dirs_not_followed();
    test_depth_limit();
    test_entry_limit();
    test_held_pins();
    test_declared_rules_respected();
    test_bad_input();

    int after = (int)count_entries("/proc/self/fd");
    ok(after == fds, "no file descriptor leaked (%d before, %d after)", fds, after);
    nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
