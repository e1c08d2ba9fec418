/* The Seatbelt profile of every shipped policy (the .lua files of policies/), pinned: each policy is
 * evaluated against the neutral host (no environment, no PATH, every host query "absent":
 * nothing of this machine gets in) with a fixed workspace layout that the scan walks (a
 * secret, a protected name, a gitdir file and its target, a nested git dir, a hard link,
 * a hostile name), and the profile, with the fixture's paths replaced by placeholders,
 * must equal spec/golden/sbpl/<policy>.sb. A policy without a golden file fails.
 *
 * Regenerate after an intended change: A3S_UPDATE_GOLDEN=1 ctest -R unit.sbpl_golden
 * (then review the diff: it is what macOS would enforce). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plan.h"
#include "policy_runtime.h"
#include "sbpl.h"
#include "scan.h"
#include "tap.h"
#include "util.h"

static char src[PATH_MAX], base[PATH_MAX];
static char ws[PATH_MAX], scratch[PATH_MAX], home[PATH_MAX], tmpd[PATH_MAX];

static void bail(const char *what)
{
    printf("Bail out! %s: %s\n", what, strerror(errno));
    exit(1);
}

static void path_of(char *out, const char *a, const char *b)
{
    if (snprintf(out, PATH_MAX, "%s/%s", a, b) >= PATH_MAX)
        bail("path too long");
}

static void mk(const char *rel)
{
    char p[PATH_MAX];
    path_of(p, ws, rel);
    if (mkdir(p, 0700) < 0)
        bail(p);
}

static void put(const char *rel, const char *text)
{
    char p[PATH_MAX];
    path_of(p, ws, rel);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || a3s_write_all(fd, text, strlen(text)) < 0 || close(fd) < 0)
        bail(p);
}

static void cleanup(void)
{
    char cmd[PATH_MAX + 32];
    /* The fixture is ours alone, below a fresh mkdtemp directory. */
    snprintf(cmd, sizeof cmd, "rm -rf -- '%s'", base);
    if (system(cmd) != 0)
        printf("# could not remove %s\n", base);
}

/* The workspace every golden file is made from. */
static void layout(void)
{
    const char *tmp = getenv("TMPDIR");
    if (snprintf(base, sizeof base, "%s/a3s-sbpl-golden-XXXXXX", tmp && *tmp ? tmp : "/tmp") >=
            (int)sizeof base ||
        !mkdtemp(base))
        bail("mkdtemp");
    char real[PATH_MAX];
    if (!realpath(base, real))
        bail("realpath");
    snprintf(base, sizeof base, "%s", real);
    path_of(ws, base, "workspace");
    path_of(scratch, base, "scratch");
    path_of(home, base, "home");
    path_of(tmpd, base, "tmp");
    if (mkdir(ws, 0700) < 0 || mkdir(scratch, 0700) < 0 || mkdir(home, 0700) < 0 ||
        mkdir(tmpd, 0700) < 0)
        bail("mkdir");
    put(".git", "gitdir: .repo/main\n"); /* a gitdir file; its target is protected */
    mk(".repo");
    mk(".repo/main");
    mk(".vscode"); /* a protected name that exists */
    put(".env", "TOKEN=1\n");
    mk("src");
    put("src/main.c", "int main(void) { return 0; }\n");
    put("src/.ENV.local", "TOKEN=2\n"); /* a secret in another case, below the top */
    mk("vendor");
    mk("vendor/lib");
    mk("vendor/lib/.git"); /* a nested git dir: not a top-level name */
    put("vendor/lib/.git/config", "[core]\n");
    mk("node_modules");
    put("node_modules/.env", "skipped by the scan\n");
    mk(".a3s");
    mk(".a3s/loops");
    put("notes.txt", "shared\n");
    char a[PATH_MAX], b[PATH_MAX];
    path_of(a, ws, "notes.txt");
    path_of(b, ws, "notes-link.txt");
    if (link(a, b) < 0) /* a hard link: masked (its other name could be a secret) */
        bail("link");
    put(".env\") (allow default) ;\\[x]*\n(allow network*)", "hostile\n");
}

/* Below /tmp, /var or /etc (TMPDIR usually is) every deny of a fixture path names its
 * /private twin too (sbpl.c, tested in test_sbpl.c): dropped here, so that the golden
 * files do not depend on where the fixture lies. */
static void drop_twins(char *s)
{
    static const char open[] = "(subpath \"", twin[] = " (subpath \"/private";
    for (char *p = strstr(s, open); p; p = strstr(p, open)) {
        char *text = p + strlen(open), *q = text;
        while (*q && *q != '"')
            q += *q == '\\' && q[1] ? 2 : 1;
        if (!*q)
            return;
        size_t n = (size_t)(q - text);
        char *next = q + 2; /* past `")` */
        if (q[1] == ')' && !strncmp(text, base, strlen(base)) &&
            !strncmp(next, twin, strlen(twin)) && !strncmp(next + strlen(twin), text, n) &&
            !strncmp(next + strlen(twin) + n, "\")", 2)) {
            char *after = next + strlen(twin) + n + 2;
            memmove(next, after, strlen(after) + 1);
        }
        p = q;
    }
}

/* text with every occurrence of from replaced by to (malloc'd). */
static char *replace(char *text, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to), n = 0;
    for (const char *p = text; (p = strstr(p, from)); p += nf)
        n++;
    char *out = malloc(strlen(text) + n * nt + 1);
    if (!out)
        bail("malloc");
    char *o = out;
    const char *p = text;
    for (const char *q; (q = strstr(p, from)); p = q + nf) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, to, nt);
        o += nt;
    }
    strcpy(o, p);
    free(text);
    return out;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return NULL;
    char *s = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap && !(s = realloc(s, cap = cap * 2 + 8192)))
            bail("realloc");
        size_t r = fread(s + n, 1, 4096, f);
        n += r;
        if (r == 0)
            break;
    }
    (void)fclose(f);
    s[n] = '\0';
    return s;
}

static void golden(const char *name, bool update)
{
    char pol[PATH_MAX], gold[PATH_MAX];
    path_of(pol, src, "policies");
    const char *search[] = {pol, NULL};
    a3s_error e = {0};
    a3s_policy_src ps = {0};
    a3s_policy_ctx ctx = {.workspace = ws, .scratch = scratch, .home = home, .tmp = tmpd,
                          .search_path = search, .platform = "linux", .guard = ws,
                          .neutral = true};
    a3s_plan *p = NULL;
    a3s_scan_result scan = {0};
    char *prof = NULL;
    bool made = a3s_lua_policy_engine.resolve(name, search, &ps, &e) == 0 &&
                (p = a3s_lua_policy_engine.eval(&ps, &ctx, &e)) != NULL &&
                a3s_scan_workspace(p, -1, NULL, &scan, &e) == 0 &&
                a3s_sbpl_profile(&(a3s_sbpl_input){.plan = p, .scan = &scan, .workspace = ws,
                                                   .scratch = scratch},
                                 &prof, &e) == 0;
    ok(made, "%s: a profile (%s)", name, made ? "" : e.msg);
    if (made) {
        /* The fixture's paths as placeholders: no regex metacharacter in either. */
        drop_twins(prof);
        prof = replace(prof, ws, "@WORKSPACE@");
        prof = replace(prof, scratch, "@SCRATCH@");
        prof = replace(prof, home, "@HOME@");
        prof = replace(prof, tmpd, "@TMP@");
        ok(!strstr(prof, base), "%s: no fixture path is left in the profile", name);
        char file[NAME_MAX + 32];
        snprintf(file, sizeof file, "spec/golden/sbpl/%s.sb", name);
        path_of(gold, src, file);
        if (update) {
            FILE *f = fopen(gold, "wbe");
            ok(f && fputs(prof, f) >= 0 && fclose(f) == 0, "%s: golden file written", name);
        } else {
            char *want = read_file(gold);
            ok(want && !strcmp(want, prof), "%s: the profile equals %s%s", name, file,
               want ? "" : " (missing: A3S_UPDATE_GOLDEN=1 makes it)");
            if (want && strcmp(want, prof))
                printf("# got:\n%s", prof);
            free(want);
        }
    }
    free(prof);
    a3s_scan_result_free(&scan);
    a3s_plan_free(p);
    a3s_policy_src_free(&ps);
}

int main(void)
{
    const char *s = getenv("A3S_SOURCE_DIR");
    if (!s || !*s) {
        printf("Bail out! A3S_SOURCE_DIR is not set (ctest sets it)\n");
        return 1;
    }
    snprintf(src, sizeof src, "%s", s);
    const char *u = getenv("A3S_UPDATE_GOLDEN");
    bool update = u && !strcmp(u, "1");
    layout();
    char pol[PATH_MAX];
    path_of(pol, src, "policies");
    DIR *d = opendir(pol);
    if (!d)
        bail(pol);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t len = strlen(de->d_name);
        if (len > 4 && !strcmp(de->d_name + len - 4, ".lua")) {
            char name[NAME_MAX + 1];
            snprintf(name, sizeof name, "%.*s", (int)(len - 4), de->d_name);
            golden(name, update);
            n++;
        }
    }
    (void)closedir(d);
    ok(n >= 4, "every shipped policy has been pinned (%d)", n);
    cleanup();
    return tap_done();
}
