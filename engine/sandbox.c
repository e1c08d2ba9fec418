/* The public API: one execution flows request -> policy -> plan -> scan/pins -> backend
 * -> exec -> result, in one direction (DESIGN.md "Data flow"). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "a3s_sandbox.h"
#include "audit.h"
#include "bwrap.h"
#include "capture.h"
#include "cgroup.h"
#include "env.h"
#include "exec.h"
#include "json.h"
#include "mediator.h"
#include "medproc.h"
#include "mirror.h"
#include "explain.h"
#include "pin.h"
#include "plan.h"
#include "protocol.h"
#include "rootid.h"
#include "wspath.h"
#include "policy_runtime.h"
#include "scan.h"
#include "update.h"
#include "rmtree.h"
#include "stale.h"
#include "a3s_seccomp.h"
#include "util.h"

extern char **environ;

#define PROBE_MARKER "a3s-native-sandbox-ready"
#define PROBE_TIMEOUT_MS 30000

struct a3s_sandbox {
    char *workspace, *bwrap, *shell, *home, *tmp;
    int ws_fd; /* the workspace, opened once (wspath.h): every later use goes through it */
    a3s_strv approved_broaden; /* broadening roots of the neutral evaluation (the digest's) */
    struct stat ws_st;
    /* Root callers: the command runs under an unprivileged host id (rootid.h), unless
     * host root was allowed and that id is not available here. */
    bool allow_host_root;
    a3s_rootid rootid;
    bool rootid_tried;
    char *rootid_error;
    char digest[65]; /* of the current policy, computed once; "" until then */
    char *launcher; /* a3s-sandbox-launch, or NULL: the argv form goes through bash */
    a3s_policy_src src;
    a3s_strv search_path;
    a3s_strv host_env;
    bool process_host;
    char *fallback_reason;
    char *cgroup_root; /* $A3S_SANDBOX_CGROUP_ROOT (tests), or NULL: /sys/fs/cgroup */
    a3s_cgroup_caps caps;
    bool caps_probed;
    char *audit_path;
    a3s_audit_fn audit_fn;
    void *audit_ud;
    char *relay; /* a3s-sandbox-relay, for mediated runs */
    char *mediator;     /* a3s-sandbox-mediator (host side), for mediated runs, or NULL */
    char *mediator_why; /* why it is NULL */
    a3s_grant *grants;
    size_t ngrants;
};

/* What this host can enforce, probed once per sandbox (it creates and removes a probe
 * cgroup in each candidate place). */
static const a3s_cgroup_caps *quota_caps(a3s_sandbox *sb)
{
    if (!sb->caps_probed) {
        a3s_cgroup_probe(sb->cgroup_root, &sb->caps);
        sb->caps_probed = true;
    }
    return &sb->caps;
}

const char *a3s_version(void)
{
    return A3S_SANDBOX_VERSION;
}

/* ---- small helpers ------------------------------------------------------------------ */

static const char *host_getenv(const a3s_sandbox *sb, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < sb->host_env.n; i++)
        if (strncmp(sb->host_env.v[i], name, n) == 0 && sb->host_env.v[i][n] == '=')
            return sb->host_env.v[i] + n + 1;
    return NULL;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static int push_path_list(a3s_strv *sv, const char *list)
{
    if (!list)
        return 0;
    char *copy = a3s_strdup(list);
    if (!copy)
        return -1;
    char *save = NULL;
    for (char *t = strtok_r(copy, ":", &save); t; t = strtok_r(NULL, ":", &save))
        if (t[0] == '/' && a3s_strv_push(sv, t) < 0) {
            free(copy);
            return -1;
        }
    free(copy);
    return 0;
}

/* Remove the scratch dir (a name in the directory open as tmp_fd). An empty one (a run
 * refused early) goes without any new fd, so even a run that failed for want of fds
 * cleans up. Returns whether it is gone. */
static bool remove_scratch(int tmp_fd, const char *scratch)
{
    if (!scratch)
        return true;
    const char *base = strrchr(scratch, '/') + 1;
    struct stat st;
    if (unlinkat(tmp_fd, base, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return true;
    return a3s_rmtree_at(tmp_fd, base) == 0 ||
           (fstatat(tmp_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
}

/* The scratch directory: its name is recorded in the run record before it is made, so
 * that an owner killed at any point leaves nothing the next sweep does not find. */
static char *make_scratch(const a3s_sandbox *sb, int tmp_fd, a3s_run_rec *rec, a3s_error *err)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (int tries = 0; tries < 8; tries++) {
        unsigned char rnd[12];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            a3s_fail_errno(err, A3S_ERR_SETUP, errno, "scratch: getrandom");
            return NULL;
        }
        char name[sizeof "a3s-sandbox-" + sizeof rnd];
        memcpy(name, "a3s-sandbox-", sizeof "a3s-sandbox-" - 1);
        for (size_t i = 0; i < sizeof rnd; i++)
            name[sizeof "a3s-sandbox-" - 1 + i] = alnum[rnd[i] % (sizeof alnum - 1)];
        name[sizeof name - 1] = '\0';
        char *path = NULL;
        if (asprintf(&path, "%s/%s", sb->tmp, name) < 0) {
            a3s_fail(err, A3S_ERR_INTERNAL, "scratch: out of memory");
            return NULL;
        }
        off_t mark = a3s_stale_run_mark(rec);
        if (a3s_stale_run_note(rec, "scratch", path, err) < 0) {
            free(path);
            return NULL;
        }
        if (mkdirat(tmp_fd, strrchr(path, '/') + 1, 0700) == 0)
            return path;
        int e = errno;
        a3s_stale_run_undo(rec, mark); /* not made: not ours to remove */
        free(path);
        if (e != EEXIST) {
            a3s_fail_errno(err, A3S_ERR_SETUP, e, "cannot create the scratch directory in %s",
                           sb->tmp);
            return NULL;
        }
    }
    a3s_fail(err, A3S_ERR_SETUP, "cannot create the scratch directory in %s: names taken",
             sb->tmp);
    return NULL;
}

/* ---- construction ------------------------------------------------------------------- */

void a3s_sandbox_free(a3s_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->ws_fd >= 0)
        close(sb->ws_fd);
    a3s_rootid_close(&sb->rootid);
    free(sb->rootid_error);
    free(sb->workspace);
    free(sb->bwrap);
    free(sb->shell);
    free(sb->launcher);
    free(sb->home);
    free(sb->tmp);
    free(sb->fallback_reason);
    free(sb->cgroup_root);
    free(sb->audit_path);
    free(sb->relay);
    free(sb->mediator);
    free(sb->mediator_why);
    free(sb->grants);
    a3s_policy_src_free(&sb->src);
    a3s_strv_free(&sb->search_path);
    a3s_strv_free(&sb->host_env);
    a3s_strv_free(&sb->approved_broaden);
    free(sb);
}

static a3s_plan *compile(a3s_sandbox *sb, const char *scratch, a3s_error *err)
{
    a3s_policy_ctx ctx = {
        .workspace = sb->workspace,
        .scratch = scratch,
        .home = sb->home,
        .tmp = sb->tmp,
        .host_env = (const char *const *)sb->host_env.v,
        .search_path = (const char *const *)sb->search_path.v,
        .platform = "linux",
    };
    return a3s_policy_eval(&sb->src, &ctx, err);
}

static int quick_probe(a3s_sandbox *sb, a3s_error *err);

/* The policy digest: the canonical plan of an evaluation against a neutral host (fixed
 * symbolic roots, no environment, no PATH, every host query "absent"), so the same
 * policy gives the same digest on every host, for every user and workspace, and nothing
 * the scan or the host contributes can change it. Cached until the policy changes. */
#define NEUTRAL "/a3s-sandbox-neutral"
static int base_digest(a3s_sandbox *sb, char out[65], a3s_error *err)
{
    if (!sb->digest[0]) {
        a3s_policy_ctx ctx = {
            .workspace = NEUTRAL "/workspace",
            .scratch = NEUTRAL "/scratch",
            .home = NEUTRAL "/home",
            .tmp = NEUTRAL "/tmp",
            .search_path = (const char *const *)sb->search_path.v,
            .platform = "linux",
            .neutral = true,
        };
        a3s_plan *p = a3s_policy_eval(&sb->src, &ctx, err);
        if (!p)
            return -1;
        int rc = a3s_plan_digest(p, sb->digest, err);
        /* The broadening roots the digest covers, for the check at each run. */
        a3s_strv_free(&sb->approved_broaden);
        for (size_t i = 0; rc == 0 && i < p->nfs; i++)
            if (p->fs[i].kind == A3S_FS_RW && p->fs[i].broaden &&
                a3s_strv_push(&sb->approved_broaden, p->fs[i].path) < 0)
                rc = a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        a3s_plan_free(p);
        if (rc < 0) {
            sb->digest[0] = '\0';
            return -1;
        }
    }
    memcpy(out, sb->digest, 65);
    return 0;
}

/* The approval digest: the policy's, and with grants, a hash over it and the normalized
 * grant set, one "host:port" line per grant in canonical order ("a3s-grants-v1", the same
 * text as before sets were bound). The port is the last ':' field, so lines are
 * unambiguous even for IPv6 hosts. sb->grants is always kept sorted by cmp_grant and free
 * of duplicates (only the grant functions below change it), so an approval covers a set:
 * order-free, duplicates collapsed. */
static int cmp_grant(const void *a, const void *b)
{
    const a3s_grant *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x->port > y->port) - (x->port < y->port);
}

static int approval_digest(a3s_sandbox *sb, const a3s_grant *g, size_t n, char out[65],
                           a3s_error *err)
{
    if (base_digest(sb, out, err) < 0)
        return -1;
    if (!n)
        return 0; /* no grants: the policy digest itself */
    /* Bounded text: hosts hold at most A3S_GRANT_HOST_MAX bytes, ports 5 digits. */
    size_t cap = sizeof "a3s-grants-v1\n" + 65 + n * (A3S_GRANT_HOST_MAX + 8);
    char *text = malloc(cap);
    if (!text)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    size_t len = (size_t)snprintf(text, cap, "a3s-grants-v1\n%s\n", out);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s:%d\n", g[i].host, g[i].port);
    a3s_sha256_hex(text, len, out);
    free(text);
    return 0;
}

static int policy_digest(a3s_sandbox *sb, char out[65], a3s_error *err)
{
    return approval_digest(sb, sb->grants, sb->ngrants, out, err);
}

/* Make `set` (sorted, distinct, owned: freed on failure) the sandbox's grants, but only
 * when the approval, if given, is for exactly this set; otherwise nothing changes. */
static int install_grants(a3s_sandbox *sb, a3s_grant *set, size_t n, const char *expected,
                          char new_digest[65], a3s_error *err)
{
    char d[65];
    if ((expected || new_digest) && approval_digest(sb, set, n, d, err) < 0) {
        free(set);
        return err ? err->code : A3S_ERR_POLICY;
    }
    if (expected && strcmp(expected, d) != 0) {
        char base[65];
        a3s_error berr;
        bool bare = n && base_digest(sb, base, &berr) == 0 && !strcmp(expected, base);
        free(set);
        return a3s_fail(err, A3S_ERR_POLICY,
                        "network grants not approved: the approved digest is %.64s, but the "
                        "policy with this grant set (%zu grant%s) has digest %s; an approval "
                        "covers the policy and the exact grant set%s; nothing changed",
                        expected, n, n == 1 ? "" : "s", d,
                        bare ? " (the approved digest is the policy's without grants)" : ""),
               A3S_ERR_POLICY;
    }
    free(sb->grants);
    sb->grants = set;
    sb->ngrants = n;
    if (new_digest)
        memcpy(new_digest, d, 65);
    return A3S_OK;
}

static int too_many_grants(size_t n, a3s_error *err)
{
    return a3s_fail(err, A3S_ERR_INVALID, "too many network grants: %zu, at most %d", n,
                    A3S_MAX_GRANTS),
           A3S_ERR_INVALID;
}

int a3s_sandbox_grant_set(a3s_sandbox *sb, const char *const *specs, size_t n,
                          const char *expected_digest, char new_digest[65], a3s_error *err)
{
    /* Counted before anything is read, so an oversized request costs nothing. */
    if (n > A3S_MAX_GRANTS)
        return too_many_grants(n, err);
    if (n && !specs)
        return a3s_fail(err, A3S_ERR_INVALID, "invalid network grants: none given"),
               A3S_ERR_INVALID;
    a3s_grant *set = NULL;
    if (n && !(set = malloc(n * sizeof *set)))
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory"), A3S_ERR_INTERNAL;
    for (size_t i = 0; i < n; i++)
        if (a3s_grant_parse(specs[i], &set[i], err) < 0) {
            free(set);
            return err ? err->code : A3S_ERR_INVALID;
        }
    /* Normalize once: sort, then drop duplicates (n log n, no per-grant re-hash). */
    size_t m = 0;
    if (n) {
        qsort(set, n, sizeof *set, cmp_grant);
        m = 1;
        for (size_t i = 1; i < n; i++)
            if (cmp_grant(&set[m - 1], &set[i]) != 0)
                set[m++] = set[i];
    }
    return install_grants(sb, set, m, expected_digest, new_digest, err);
}

int a3s_sandbox_grant(a3s_sandbox *sb, const char *spec, const char *expected_digest,
                      char new_digest[65], a3s_error *err)
{
    a3s_grant g;
    if (a3s_grant_parse(spec, &g, err) < 0)
        return err ? err->code : A3S_ERR_INVALID;
    /* Where g goes in the sorted set, and whether it is there already. */
    size_t lo = 0, hi = sb->ngrants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_grant(&sb->grants[mid], &g) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool held = lo < sb->ngrants && cmp_grant(&sb->grants[lo], &g) == 0;
    size_t n = sb->ngrants + !held;
    if (n > A3S_MAX_GRANTS)
        return too_many_grants(n, err);
    /* The candidate set; an identical re-grant changes nothing, but is checked the same. */
    a3s_grant *set = malloc(n * sizeof *set);
    if (!set)
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory"), A3S_ERR_INTERNAL;
    if (sb->ngrants)
        memcpy(set, sb->grants, sb->ngrants * sizeof *set);
    if (!held) {
        memmove(set + lo + 1, set + lo, (sb->ngrants - lo) * sizeof *set);
        set[lo] = g;
    }
    return install_grants(sb, set, n, expected_digest, new_digest, err);
}

/* A policy file the command can write is refused: a run could rewrite what the next one
 * enforces. */
static int policy_outside_workspace(const a3s_sandbox *sb, const a3s_policy_src *src,
                                    a3s_error *err)
{
    char *real = realpath(src->path, NULL);
    bool inside = real && a3s_path_within(real, sb->workspace);
    free(real);
    if (inside)
        return a3s_fail(err, A3S_ERR_POLICY,
                        "policy file %s lies inside the workspace %s, where the command could "
                        "rewrite what the next run enforces: keep policies outside the workspace",
                        src->path, sb->workspace);
    return 0;
}

a3s_sandbox *a3s_sandbox_new(const a3s_options *opts, a3s_error *err)
{
    a3s_options none = {0};
    if (!opts)
        opts = &none;
    a3s_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    sb->ws_fd = -1;
    sb->rootid = (a3s_rootid)A3S_ROOTID_INIT;
    sb->allow_host_root = opts->allow_host_root;
    const char *const *env = opts->host_env ? opts->host_env : (const char *const *)environ;
    for (size_t i = 0; env && env[i]; i++)
        if (a3s_strv_push(&sb->host_env, env[i]) < 0)
            goto oom;
    if (!sb->host_env.v && a3s_strv_push(&sb->host_env, "A3S_EMPTY_ENV_=1") < 0)
        goto oom;

    const char *cgr = host_getenv(sb, "A3S_SANDBOX_CGROUP_ROOT");
    if (cgr && *cgr && !(sb->cgroup_root = a3s_strdup(cgr)))
        goto oom;
    if (opts->audit_path && !(sb->audit_path = a3s_strdup(opts->audit_path)))
        goto oom;
    sb->audit_fn = opts->audit_fn;
    sb->audit_ud = opts->audit_ud;

    /* Workspace: opened once, walked without trusting links a command could plant. */
    const char *ws = opts->workspace ? opts->workspace : ".";
    if (a3s_wspath_open(ws, &sb->workspace, &sb->ws_fd, err) < 0)
        goto fail;
    if (fstat(sb->ws_fd, &sb->ws_st) < 0) {
        a3s_fail_errno(err, A3S_ERR_INVALID, errno, "sandbox workspace %s", sb->workspace);
        goto fail;
    }

    /* Host roots the policy hides. */
    const char *home = host_getenv(sb, "HOME");
    if (!home || home[0] != '/') {
        struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : "/nonexistent";
    }
    sb->home = realpath(home, NULL);
    if (!sb->home && !(sb->home = a3s_strdup(home)))
        goto oom;
    const char *tmp = host_getenv(sb, "TMPDIR");
    if (!tmp || tmp[0] != '/' || !is_dir(tmp))
        tmp = "/tmp";
    sb->tmp = realpath(tmp, NULL);
    if (!sb->tmp) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "temporary directory %s", tmp);
        goto fail;
    }
    /* The scratch dir is made there and bound by path, and the state records (pins,
     * scratch owners) that later runs act on live in the state root: never where
     * commands write. */
    const char *state_root = a3s_stale_root(sb->tmp);
    if (a3s_path_within(sb->tmp, sb->workspace) || a3s_path_within(state_root, sb->workspace) ||
        a3s_path_within(a3s_stale_fallback_root(), sb->workspace)) {
        a3s_fail(err, A3S_ERR_INVALID,
                 "the workspace %s contains the temporary directory %s or the sandbox's state "
                 "directory in %s: choose a workspace below them, or set TMPDIR elsewhere",
                 sb->workspace, sb->tmp, state_root);
        goto fail;
    }

    /* Policy search path: explicit dirs, installed policies, the source tree's policies
     * (when running from a build tree), then $A3S_SANDBOX_POLICY_PATH. */
    for (size_t i = 0; opts->policy_path && opts->policy_path[i]; i++)
        if (a3s_strv_push(&sb->search_path, opts->policy_path[i]) < 0)
            goto oom;
    if (is_dir(A3S_POLICY_INSTALL_DIR) && a3s_strv_push(&sb->search_path, A3S_POLICY_INSTALL_DIR) < 0)
        goto oom;
    if (is_dir(A3S_SOURCE_POLICY_DIR) && a3s_strv_push(&sb->search_path, A3S_SOURCE_POLICY_DIR) < 0)
        goto oom;
    if (push_path_list(&sb->search_path, host_getenv(sb, "A3S_SANDBOX_POLICY_PATH")) < 0)
        goto oom;

    /* A policy directory the command can write is not a policy directory: a run could
     * rewrite what the next one enforces. Such entries leave the search path. */
    size_t keep = 0;
    for (size_t i = 0; i < sb->search_path.n; i++) {
        char *real = realpath(sb->search_path.v[i], NULL);
        bool inside = real && a3s_path_within(real, sb->workspace);
        free(real);
        if (inside)
            free(sb->search_path.v[i]);
        else
            sb->search_path.v[keep++] = sb->search_path.v[i];
    }

    bool dropped = keep < sb->search_path.n;
    sb->search_path.n = keep;
    if (sb->search_path.v)
        sb->search_path.v[keep] = NULL;
    if (a3s_policy_resolve(opts->policy ? opts->policy : "baseline",
                           (const char *const *)sb->search_path.v, &sb->src, err) < 0) {
        if (dropped && err && strlen(err->msg) + 120 < sizeof err->msg)
            strcat(err->msg, " (policy directories inside the workspace are not searched: "
                             "set A3S_SANDBOX_POLICY_PATH to a copy outside it)");
        goto fail;
    }
    if (policy_outside_workspace(sb, &sb->src, err) < 0)
        goto fail;

    /* Evaluate once now so that a broken policy fails at construction. */
    if (!opts->defer_policy) {
        char *scratch = NULL;
        if (asprintf(&scratch, "%s/a3s-sandbox-XXXXXX", sb->tmp) < 0)
            goto oom;
        a3s_plan *p = compile(sb, scratch, err);
        free(scratch);
        if (!p)
            goto fail;
        a3s_plan_free(p);
    }

    /* Trusted executables, never from inside the workspace. */
    a3s_error berr = {0};
    const char *bw = opts->bwrap ? opts->bwrap : host_getenv(sb, "A3S_SANDBOX_BWRAP");
    if (!bw || !*bw)
        bw = "/usr/bin/bwrap";
    int brc = a3s_bwrap_resolve_exe(bw, sb->workspace, "bubblewrap", &sb->bwrap, &berr);
    if (a3s_bwrap_resolve_exe("/bin/bash", sb->workspace, "trusted bash", &sb->shell, err) < 0)
        goto fail;
    /* The in-sandbox launcher: $A3S_SANDBOX_LAUNCHER, else the installed one, else the
     * one of the build tree. Like bwrap, never from inside the workspace. */
    const char *ln = host_getenv(sb, "A3S_SANDBOX_LAUNCHER");
    if (!ln || !*ln)
        ln = access(A3S_LAUNCH_INSTALL_PATH, X_OK) == 0 ? A3S_LAUNCH_INSTALL_PATH
                                                         : A3S_LAUNCH_BUILD_PATH;
    if (brc == 0 &&
        a3s_bwrap_resolve_exe(ln, sb->workspace, "sandbox launcher", &sb->launcher, &berr) < 0)
        brc = -1;
    /* The relay is needed only for grants: resolved now, required when used. */
    const char *rl = host_getenv(sb, "A3S_SANDBOX_RELAY");
    if (!rl || !*rl)
        rl = access(A3S_RELAY_INSTALL_PATH, X_OK) == 0 ? A3S_RELAY_INSTALL_PATH
                                                        : A3S_RELAY_BUILD_PATH;
    a3s_error rerr;
    (void)a3s_bwrap_resolve_exe(rl, sb->workspace, "network relay", &sb->relay, &rerr);
    /* So is the host-side mediator: $A3S_SANDBOX_MEDIATOR, else the installed one, else
     * the build tree's. It runs on the host with the caller's rights: never one from the
     * workspace, which the command can rewrite. */
    const char *md = host_getenv(sb, "A3S_SANDBOX_MEDIATOR");
    if (!md || !*md)
        md = access(A3S_MEDIATOR_INSTALL_PATH, X_OK) == 0 ? A3S_MEDIATOR_INSTALL_PATH
                                                           : A3S_MEDIATOR_BUILD_PATH;
    a3s_error merr = {0};
    if (a3s_bwrap_resolve_exe(md, sb->workspace, "network mediator", &sb->mediator, &merr) < 0 &&
        !(sb->mediator_why = a3s_strdup(merr.msg)))
        goto oom;
    if (brc == 0 && opts->allow_process_host && quick_probe(sb, &berr) < 0)
        brc = -1;
    if (brc < 0) {
        if (!opts->allow_process_host) {
            *err = berr;
            goto fail;
        }
        sb->process_host = true;
        if (!(sb->fallback_reason = a3s_strdup(berr.msg)))
            goto oom;
    }
    return sb;
oom:
    a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
fail:
    a3s_sandbox_free(sb);
    return NULL;
}

const char *a3s_sandbox_workspace(const a3s_sandbox *sb)
{
    return sb->workspace;
}

const char *a3s_sandbox_policy_name(const a3s_sandbox *sb)
{
    return sb->src.name;
}

const char *a3s_sandbox_backend(const a3s_sandbox *sb)
{
    return sb->process_host ? "process-host" : "linux-bwrap";
}

const char *a3s_sandbox_fallback_reason(const a3s_sandbox *sb)
{
    return sb->fallback_reason;
}

/* ---- one execution ------------------------------------------------------------------ */

typedef struct prepared {
    /* What this execution makes on the host, recorded before it is made (stale.h). */
    a3s_run_rec *rec;
    bool leftover; /* something could not be removed: the record stays for a sweep */
    int tmp_fd;    /* the directory holding the scratch dir: removal needs no new fd */
    char *scratch;
    int scratch_fd;
    struct stat scratch_st;
    a3s_strv setup;      /* setup records (protocol.h) */
    int ws_mnt, scratch_mnt; /* mapped identity: idmapped detached mounts */
    bool mapped;
    a3s_plan *plan;
    a3s_scan_result scan;
    a3s_pins *pins;
    a3s_strv env;
    a3s_strv args; /* bwrap options, passed with --args */
    a3s_strv cmd;  /* "--", bash, -c, ... on bwrap's real argv */
    char digest[65];
    bool mediated; /* grants: the relay runs first, the mediator outside */
} prepared;

/* Mediated runs: the command reaches the relay's loopback proxies; whatever the policy
 * and the request said about proxies, these are the only ones (SPEC §6). */
static int set_proxy_env(a3s_strv *env)
{
    static const char *const drop[] = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
                                       "http_proxy", "https_proxy", "all_proxy", "no_proxy"};
    size_t w = 0;
    for (size_t i = 0; i < env->n; i++) {
        bool keep = true;
        for (size_t d = 0; d < sizeof drop / sizeof drop[0]; d++) {
            size_t n = strlen(drop[d]);
            if (!strncmp(env->v[i], drop[d], n) && env->v[i][n] == '=')
                keep = false;
        }
        if (keep)
            env->v[w++] = env->v[i];
        else
            free(env->v[i]);
    }
    env->n = w;
    if (env->v)
        env->v[w] = NULL;
    const char *http = "http://" A3S_RELAY_HTTP, *socks = "socks5://" A3S_RELAY_SOCKS;
    if (a3s_strv_pushf(env, "HTTP_PROXY=%s", http) < 0 ||
        a3s_strv_pushf(env, "HTTPS_PROXY=%s", http) < 0 ||
        a3s_strv_pushf(env, "http_proxy=%s", http) < 0 ||
        a3s_strv_pushf(env, "https_proxy=%s", http) < 0 ||
        a3s_strv_pushf(env, "ALL_PROXY=%s", socks) < 0 ||
        a3s_strv_pushf(env, "all_proxy=%s", socks) < 0 || a3s_strv_push(env, "NO_PROXY=") < 0 ||
        a3s_strv_push(env, "no_proxy=") < 0)
        return -1;
    return 0;
}

static void prepared_free(prepared *pp)
{
    a3s_strv_free(&pp->setup);
    if (pp->ws_mnt >= 0)
        close(pp->ws_mnt);
    if (pp->scratch_mnt >= 0)
        close(pp->scratch_mnt);
    if (pp->scratch_fd >= 0)
        close(pp->scratch_fd);
    pp->ws_mnt = pp->scratch_mnt = pp->scratch_fd = -1;
    a3s_pins_release(pp->pins);
    pp->pins = NULL;
    a3s_scan_result_free(&pp->scan);
    a3s_plan_free(pp->plan);
    pp->plan = NULL;
    a3s_strv_free(&pp->env);
    a3s_strv_free(&pp->args);
    a3s_strv_free(&pp->cmd);
    if (pp->scratch && !remove_scratch(pp->tmp_fd, pp->scratch))
        pp->leftover = true;
    free(pp->scratch);
    pp->scratch = NULL;
    if (pp->tmp_fd >= 0)
        close(pp->tmp_fd);
    pp->tmp_fd = -1;
    /* Last: everything it lists is gone now (or left for the sweep). */
    a3s_stale_run_close(pp->rec, !pp->leftover);
    pp->rec = NULL;
}

/* A broadening root of this run's plan must be one the digest covers: a policy could
 * otherwise declare one only on hosts where a query says so, and the approval of its
 * digest (computed where every query answers "absent") would not show it. Host roots are
 * compared in their neutral spelling. */
static int check_broadening_approved(a3s_sandbox *sb, const a3s_plan *p, a3s_error *err)
{
    char d[65];
    if (base_digest(sb, d, err) < 0)
        return -1;
    const char *roots[4][2] = {{sb->workspace, NEUTRAL "/workspace"},
                               {p->scratch, NEUTRAL "/scratch"},
                               {sb->home, NEUTRAL "/home"},
                               {sb->tmp, NEUTRAL "/tmp"}};
    for (size_t i = 0; i < p->nfs; i++) {
        const a3s_fs_rule *r = &p->fs[i];
        if (r->kind != A3S_FS_RW || !r->broaden)
            continue;
        char *sym = NULL;
        for (int k = 0; k < 4 && !sym; k++) {
            const char *root = roots[k][0];
            if (root && a3s_path_within(r->path, root) &&
                asprintf(&sym, "%s%s", roots[k][1], r->path + strlen(root)) < 0)
                return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        }
        /* Written literally, or through a host root (ctx.home .. "/x"). */
        bool ok = false;
        for (size_t j = 0; j < sb->approved_broaden.n && !ok; j++)
            ok = !strcmp(sb->approved_broaden.v[j], r->path) ||
                 (sym && !strcmp(sb->approved_broaden.v[j], sym));
        free(sym);
        if (!ok)
            return a3s_fail(err, A3S_ERR_POLICY,
                            "policy %s declares the writable root %s only on this host (a "
                            "host query decided it): its digest does not cover it, refused",
                            sb->src.name, r->path);
    }
    return 0;
}

/* Root callers: the command runs under an unprivileged host id, with the workspace and
 * the scratch dir as idmapped mounts (rootid.h). Where that cannot be done, the run is
 * refused unless host root was allowed. Other callers run as themselves. */
static int mapped_identity(a3s_sandbox *sb, prepared *pp, a3s_error *err)
{
    if (geteuid() != 0)
        return 0;
    a3s_error e = {0};
    if (!sb->rootid_tried) {
        sb->rootid_tried = true;
        uint32_t id = A3S_MAPPED_ID_DEFAULT;
        const char *env = host_getenv(sb, "A3S_SANDBOX_MAPPED_ID");
        if (env && *env) {
            char *end;
            unsigned long v = strtoul(env, &end, 10);
            if (*end || v == 0 || v >= 0xFFFFFFFFul)
                return a3s_fail(err, A3S_ERR_INVALID,
                                "A3S_SANDBOX_MAPPED_ID=%s is not a usable uid", env);
            id = (uint32_t)v;
        }
        if (a3s_rootid_open(&sb->rootid, id, &e) < 0 &&
            !(sb->rootid_error = a3s_strdup(e.msg)))
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    if (!sb->rootid_error) {
        bool ro = true;
        for (size_t i = 0; i < pp->plan->nfs; i++)
            if (!strcmp(pp->plan->fs[i].path, sb->workspace) &&
                pp->plan->fs[i].kind == A3S_FS_RW)
                ro = false;
        pp->ws_mnt = a3s_rootid_clone(&sb->rootid, sb->ws_fd, "workspace", sb->workspace, ro, &e);
        if (pp->ws_mnt >= 0)
            pp->scratch_mnt = a3s_rootid_clone(&sb->rootid, pp->scratch_fd, "scratch directory",
                                               pp->scratch, false, &e);
        if (pp->ws_mnt >= 0 && pp->scratch_mnt >= 0) {
            pp->mapped = true;
            return 0;
        }
    } else {
        a3s_fail(&e, A3S_ERR_SETUP, "%s", sb->rootid_error);
    }
    if (sb->allow_host_root || pp->plan->allow_host_root)
        return 0; /* reported as identity "host-root" */
    *err = e;
    return -1;
}

/* Policy -> validated plan -> scan -> (pins) -> env -> bwrap args. `pin` is false for
 * read-only questions (plan JSON): then missing protected names are not pinned. */
static int prepare(a3s_sandbox *sb, const a3s_exec_request *req, bool pin, prepared *pp,
                   a3s_error *err)
{
    memset(pp, 0, sizeof *pp);
    pp->scratch_fd = pp->ws_mnt = pp->scratch_mnt = pp->tmp_fd = -1;
    /* Best effort: clean up after executions that were killed (pins, scratch dirs). */
    a3s_pins_sweep(a3s_stale_root(sb->tmp));
    a3s_stale_sweep(a3s_stale_root(sb->tmp));
    if ((pp->tmp_fd = open(sb->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open the temp dir %s", sb->tmp);
    if (a3s_stale_run_open(a3s_stale_root(sb->tmp), &pp->rec, err) < 0) {
        prepared_free(pp);
        return -1;
    }
    if (!(pp->scratch = make_scratch(sb, pp->tmp_fd, pp->rec, err))) {
        prepared_free(pp);
        return -1;
    }
    /* The scratch dir as created: its identity is checked again inside. */
    pp->scratch_fd = open(pp->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pp->scratch_fd < 0 || fstat(pp->scratch_fd, &pp->scratch_st) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "scratch directory %s", pp->scratch);
        goto fail;
    }
    if (!(pp->plan = compile(sb, pp->scratch, err)) ||
        check_broadening_approved(sb, pp->plan, err) < 0)
        goto fail;
    if (policy_digest(sb, pp->digest, err) < 0)
        goto fail;
    if (a3s_scan_workspace(pp->plan, sb->ws_fd, &pp->scan, err) < 0)
        goto fail;
    if (pin) {
        if (a3s_pins_acquire_in(a3s_stale_root(sb->tmp), sb->ws_fd, sb->workspace,
                                &pp->scan.missing_dirs, &pp->scan.missing_files, &pp->pins,
                                err) < 0)
            goto fail;
        char *const *pins = a3s_pins_paths(pp->pins);
        for (size_t i = 0; pins && pins[i]; i++)
            if (a3s_plan_add_fs(pp->plan, A3S_FS_PROTECT, pins[i], false, true, NULL, 0, err) < 0)
                goto fail;
    }
    if (a3s_env_compose(&pp->plan->env, (const char *const *)sb->host_env.v,
                        req ? req->env : NULL, &pp->env, err) < 0)
        goto fail;
    if (sb->process_host) {
        if (sb->ngrants) {
            a3s_fail(err, A3S_ERR_SETUP, "network grants need the native sandbox: the "
                     "process-host fallback has no network boundary to mediate");
            goto fail;
        }
        return 0;
    }
    static const char *const probe_argv[] = {"true", NULL};
    if (mapped_identity(sb, pp, err) < 0)
        goto fail;
    a3s_bwrap_cmd cmd = {
        .shell = sb->shell,
        .launcher = sb->launcher,
        .ws_dev = sb->ws_st.st_dev,
        .ws_ino = sb->ws_st.st_ino,
        .scratch_dev = pp->scratch_st.st_dev,
        .scratch_ino = pp->scratch_st.st_ino,
        .scan = &pp->scan,
        .mapped = pp->mapped,
        .uid = getuid(),
        .gid = getgid(),
        .tag = pin ? a3s_stale_run_tag(pp->rec) : NULL,
    };
    if (sb->ngrants) {
        if (!sb->relay) {
            a3s_fail(err, A3S_ERR_SETUP, "network grants need a3s-sandbox-relay, which was not "
                     "found (set A3S_SANDBOX_RELAY)");
            goto fail;
        }
        pp->mediated = true;
        if (set_proxy_env(&pp->env) < 0) {
            a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
            goto fail;
        }
        cmd.relay = sb->relay;
    }
    if (req && req->argv)
        cmd.argv = (char *const *)req->argv;
    else if (req && req->shell_command)
        cmd.shell_command = req->shell_command;
    else
        cmd.argv = (char *const *)probe_argv;
    if (a3s_bwrap_build_args(pp->plan, &pp->env, &cmd, &pp->args, &pp->cmd, &pp->setup,
                             err) < 0)
        goto fail;
    return 0;
fail:
    prepared_free(pp);
    return -1;
}

static int check_request(const a3s_exec_request *req, a3s_error *err)
{
    if (!req || (!req->argv == !req->shell_command))
        return a3s_fail(err, A3S_ERR_INVALID, "exec: give exactly one of argv and a shell command");
    if (req->argv && !req->argv[0])
        return a3s_fail(err, A3S_ERR_INVALID, "exec: empty argv");
    if (req->shell_command && !req->shell_command[0])
        return a3s_fail(err, A3S_ERR_INVALID, "exec: empty command");
    if (req->timeout_ms == 0)
        return a3s_fail(err, A3S_ERR_INVALID,
                        "exec: the command timeout must be greater than zero");
    for (size_t i = 0; req->env && req->env[i]; i++)
        if (a3s_env_check_entry(req->env[i], err) < 0)
            return -1;
    return 0;
}

/* The result's denials as JSON array text; NULL on ENOMEM (never a list missing one). */
static char *denials_json(const a3s_outcome *o, int64_t timeout_ms, const a3s_plan *p,
                          const a3s_cgroup_events *ev, const char *med_lines)
{
    json_t *a = json_array();
    bool ok = a != NULL;
    /* The mediator's refusals, one JSON object per line, its summary (exact counts per
     * reason) last; records without a summary mean the mediator was killed early. A
     * line that does not parse (the mediator killed mid-write) is not a record. */
    bool records = false, summary = false;
    for (const char *l = med_lines; ok && l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        json_error_t je;
        json_t *d = json_loadb(l, n, 0, &je);
        if (d) {
            if (json_is_true(json_object_get(d, "summary")))
                summary = true;
            else
                records = true;
            ok = a3s_json_push(a, d) == 0;
        }
        l += n + (nl ? 1 : 0);
    }
    /* Every record below is engine text (ASCII): json_pack fails only on ENOMEM, and
     * a3s_json_push turns that into a failure of the whole list. */
    if (ok && records && !summary)
        ok = a3s_json_push(a, json_pack("{s:s, s:b, s:b}", "kind", "network", "summary", 1,
                                        "incomplete", 1)) == 0;
    if (ok && o->timed_out)
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:I}", "kind", "deadline", "target",
                                        "<process-tree>", "limit_ms",
                                        (json_int_t)timeout_ms)) == 0;
    if (ok && o->cap && a3s_capture_truncated(o->cap))
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:I}", "kind", "output_limit", "target",
                                        "<output>", "limit_bytes",
                                        (json_int_t)p->limits.output_bytes)) == 0;
    if (ok && ev && ev->oom_kills)
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:s, s:I, s:I}", "kind", "quota",
                                        "resource", "memory", "event", "oom_kill", "count",
                                        (json_int_t)ev->oom_kills, "limit_bytes",
                                        (json_int_t)p->limits.memory_bytes)) == 0;
    if (ok && ev && ev->pids_max)
        ok = a3s_json_push(a, json_pack("{s:s, s:s, s:s, s:I, s:I}", "kind", "quota",
                                        "resource", "processes", "event", "max", "count",
                                        (json_int_t)ev->pids_max, "limit",
                                        (json_int_t)p->limits.processes)) == 0;
    char *s = ok ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

/* The grants as [{host, port[, policy_digest]}...] (digest: NULL leaves it out); NULL on
 * ENOMEM. Hosts are normalized ASCII, written through a3s_json_str all the same. */
static json_t *grants_array(const a3s_sandbox *sb, const char *digest)
{
    json_t *g = json_array();
    bool ok = g != NULL;
    for (size_t i = 0; ok && i < sb->ngrants; i++) {
        json_t *e = json_object();
        ok = a3s_json_set(e, "host", a3s_json_cstr(sb->grants[i].host)) == 0 &&
             a3s_json_set(e, "port", json_integer(sb->grants[i].port)) == 0 &&
             (!digest || a3s_json_set(e, "policy_digest", a3s_json_cstr(digest)) == 0);
        if (!ok)
            json_decref(e);
        else
            ok = a3s_json_push(g, e) == 0;
    }
    if (!ok) {
        json_decref(g);
        return NULL;
    }
    return g;
}

static int fill_result(a3s_sandbox *sb, const prepared *pp, const a3s_outcome *o,
                       int64_t timeout_ms, const a3s_cgroup_events *ev, const char *id,
                       const char *med_denials, a3s_result *r, a3s_error *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->execution_id, sizeof r->execution_id, "%s", id);
    if (a3s_capture_render(o->cap, A3S_STDOUT, &r->stdout_text, &r->stdout_len,
                           &r->stdout_rest, &r->stdout_rest_len) < 0 ||
        a3s_capture_render(o->cap, A3S_STDERR, &r->stderr_text, &r->stderr_len,
                           &r->stderr_rest, &r->stderr_rest_len) < 0)
        goto oom;
    r->timed_out = o->timed_out;
    r->truncated = a3s_capture_truncated(o->cap);
    r->total_bytes = a3s_capture_total(o->cap);
    r->captured_bytes = a3s_capture_captured(o->cap);
    r->duration_ms = o->duration_ms;
    /* The launcher reports the command's own wait status; without it (process-host, or
     * a command that killed its launcher) bwrap's status is all there is. */
    int status = o->has_command_status ? o->command_status : o->wait_status;
    if (o->timed_out) {
        r->has_signal = true;
        r->signal = 9;
    } else if (WIFEXITED(status)) {
        r->has_exit_code = true;
        r->exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r->has_signal = true;
        r->signal = WTERMSIG(status);
    }
    snprintf(r->policy, sizeof r->policy, "%s", pp->plan->name);
    memcpy(r->policy_digest, pp->digest, sizeof r->policy_digest);
    r->backend = a3s_sandbox_backend(sb);
    r->identity = pp->mapped ? "mapped" : geteuid() == 0 ? "host-root" : "caller";
    if (!(r->denials_json = denials_json(o, timeout_ms, pp->plan, ev, med_denials)))
        goto oom;
    json_t *g = grants_array(sb, pp->digest);
    r->grants_json = g ? json_dumps(g, JSON_COMPACT) : NULL;
    json_decref(g);
    if (!r->grants_json)
        goto oom;
    return 0;
oom:
    a3s_result_free(r);
    return a3s_fail(err, A3S_ERR_INTERNAL, "result: out of memory");
}

/* What bwrap said before the command could start, for "never started" errors. */
static void setup_reason(const a3s_outcome *o, char *buf, size_t n)
{
    static const char prefix[] = "a3s-sandbox: "; /* the setup step's own, said once */
    const char *diag = o->setup_diag;
    size_t len = o->setup_diag_len;
    if (len > sizeof prefix - 1 && !memcmp(diag, prefix, sizeof prefix - 1)) {
        diag += sizeof prefix - 1;
        len -= sizeof prefix - 1;
    }
    while (len > 0 && (diag[len - 1] == '\n' || diag[len - 1] == '\r'))
        len--;
    if (len == 0)
        snprintf(buf, n, "bubblewrap exited (status %d) without starting the command",
                 WIFEXITED(o->wait_status) ? WEXITSTATUS(o->wait_status) : 128 + WTERMSIG(o->wait_status));
    else
        snprintf(buf, n, "%.*s", (int)len, diag);
}

/* The host-side mediator of a mediated run: the program a3s-sandbox-mediator, spawned
 * (medproc.h), never a fork of this process. */
static int start_mediator(a3s_sandbox *sb, int *relay_end, a3s_medproc *m, a3s_error *err)
{
    if (!sb->mediator) {
        *m = (a3s_medproc)A3S_MEDPROC_NONE;
        return a3s_fail(err, A3S_ERR_SETUP, "network grants need a3s-sandbox-mediator, which "
                        "was not found (set A3S_SANDBOX_MEDIATOR): %s",
                        sb->mediator_why ? sb->mediator_why : "no path");
    }
    return a3s_medproc_start(sb->mediator, sb->grants, sb->ngrants,
                             (const char *const *)sb->host_env.v, relay_end, m, err);
}

/* Stop it and return its denial records (malloc'd, may be NULL); safe when not started. */
static char *stop_mediator(a3s_medproc *m)
{
    return a3s_medproc_stop(m);
}

/* The filter of a mediated run: the plan's, with the socket families AF_INET and
 * AF_INET6 only (AF_UNIX removed whatever the policy said). */
static int export_mediated_filter(const a3s_seccomp_plan *sp, a3s_error *err)
{
    int fams[64];
    size_t n = 0;
    for (size_t i = 0; i < sp->nsocket_allow && n < 62; i++)
        if (sp->socket_allow[i] != AF_UNIX && sp->socket_allow[i] != AF_INET &&
            sp->socket_allow[i] != AF_INET6)
            fams[n++] = sp->socket_allow[i];
    fams[n++] = AF_INET;
    fams[n++] = AF_INET6;
    a3s_seccomp_plan copy = *sp;
    copy.socket_allow = fams;
    copy.nsocket_allow = copy.capsocket_allow = n;
    return a3s_seccomp_export(&copy, err);
}

/* Setting up the sandbox (bwrap, the trusted setup step) must end within this; the
 * command's deadline counts from its start. */
#define A3S_SETUP_LIMIT_MS 10000

/* Each process of the launch goes into the run record as soon as its pid is known. */
static void record_pid(void *ud, pid_t pid)
{
    (void)a3s_stale_run_proc(ud, pid, NULL);
}

static int record_cgroup(void *ud, const char *path, a3s_error *err)
{
    return a3s_stale_run_note(ud, "cgroup", path, err);
}

/* What the mirror's reader has not taken yet, then the rest of each stream (marker and
 * tail). Called once the tree is gone and everything of the run is released: the
 * caller's reader may take its time (a pager), nothing of the run waits for it. */
static void mirror_finish(const a3s_exec_request *req, const a3s_outcome *o, a3s_result *r,
                          char *const dhead[2], const size_t dlen[2])
{
    /* What the live mirror still held, then each stream: its head first when it was not
     * mirrored live (deferred), then the rest (marker, tail). */
    const char *part[5] = {o->mirror_pending, dhead[0], r->stdout_rest, dhead[1],
                           r->stderr_rest};
    size_t len[5] = {o->mirror_pending_len, dlen[0], r->stdout_rest_len, dlen[1],
                     r->stderr_rest_len};
    int fd[5] = {o->mirror_pending_stream == 2 ? req->mirror_fd[1] : req->mirror_fd[0],
                 req->mirror_fd[0], req->mirror_fd[0], req->mirror_fd[1], req->mirror_fd[1]};
    for (int k = 0; k < 5 && !r->output_closed; k++) {
        if (fd[k] < 0 || !part[k] || len[k] == 0)
            continue;
        int rc = a3s_mirror_drain(fd[k], part[k], len[k], req->cancel_fd);
        if (rc == -1)
            r->output_closed = true;
        else if (rc == -2)
            break; /* the caller cancelled: the rest stays in the result */
    }
}

int a3s_sandbox_exec(a3s_sandbox *sb, const a3s_exec_request *req, a3s_result *r,
                     a3s_error *err)
{
    memset(r, 0, sizeof *r);
    if (check_request(req, err) < 0)
        return err ? err->code : A3S_ERR_INVALID;

    /* One id and one audit sink per execution; events never carry secret values. */
    char id[33];
    if (a3s_audit_new_id(id, err) < 0)
        return err ? err->code : A3S_ERR_INTERNAL;
    a3s_audit *au = NULL;
    if (sb->audit_path || sb->audit_fn) {
        char d[65] = "";
        a3s_error derr;
        (void)policy_digest(sb, d, &derr); /* a broken policy is audited as a compile deny */
        if (a3s_audit_open(&au, sb->audit_path, sb->audit_fn, sb->audit_ud, id, sb->src.name,
                           d, a3s_sandbox_backend(sb), sb->workspace, err) < 0)
            return err ? err->code : A3S_ERR_SETUP;
    }
    prepared pp;
    if (prepare(sb, req, true, &pp, err) < 0) {
        a3s_audit_emit(au, "compile", "deny", "policy-refused", "compile-failed", NULL);
        a3s_error cerr;
        (void)a3s_audit_close(au, &cerr);
        return err ? err->code : A3S_ERR_SETUP;
    }
    a3s_audit_emit(au, "compile", "allow", "policy-allow", "enforced-policy", NULL);
    /* (The workspace root's mode and ACLs are kept by the first holder of the workspace
     * and restored by the last one, or after a crash: see wsattrs.h.) */
    a3s_audit_emit(au, "network", "deny", "network-deny-all",
                   sb->ngrants ? "<network-except-mediator>" : "<network>", NULL);
    for (size_t i = 0; i < sb->ngrants; i++) {
        char t[A3S_GRANT_HOST_MAX + 40];
        snprintf(t, sizeof t, "<network-grant:%s:%d>", sb->grants[i].host, sb->grants[i].port);
        a3s_audit_emit(au, "network", "allow", "grant-applied", t, NULL);
    }

    int rc = A3S_ERR_SETUP;
    int cmd_filter_fd = -1, channel_fd = -1;
    a3s_medproc med = A3S_MEDPROC_NONE;
    a3s_cgroup *cg = NULL;
    a3s_cgroup_events ev = {0};
    int seccomp_fd = -1, args_fd = -1, setup_fd = -1, started[2] = {-1, -1},
        status[2] = {-1, -1};
    a3s_outcome o;
    memset(&o, 0, sizeof o);
    int64_t timeout_ms = pp.plan->limits.timeout_ms;
    if (req->timeout_ms > 0 && req->timeout_ms < timeout_ms)
        timeout_ms = req->timeout_ms;

    a3s_launch l = {
        .stdin_fd = req->stdin_fd,
        .stdin_data = req->stdin_data,
        .stdin_len = req->stdin_len,
        .started_fd = -1,
        .status_fd = -1,
        .timeout_ms = timeout_ms,
        .output_budget = (size_t)pp.plan->limits.output_bytes,
        .nofile = pp.plan->limits.nofile,
        .core_bytes = pp.plan->limits.core_bytes,
        .fsize = pp.plan->limits.file_size_bytes,
        .on_output = req->on_output,
        .output_ud = req->output_ud,
        .cancel_fd = req->cancel_fd,
        .cwd = sb->workspace,
        .mirror = req->mirror,
        .mirror_fd = {req->mirror ? req->mirror_fd[0] : -1, req->mirror ? req->mirror_fd[1] : -1},
        .setup_timeout_ms = A3S_SETUP_LIMIT_MS,
        .on_pid = record_pid,
        .pid_ud = pp.rec,
    };
    char *argv_buf[8];
    char *dhead[2] = {NULL, NULL}; /* heads of streams mirrored after the run (deferred) */
    size_t dlen[2] = {0, 0};
    char **bargv = NULL;
    char fdnum[16];

    /* Quotas: the whole tree joins its cgroup before bwrap runs; a quota this host
     * cannot enforce refuses the run (fail closed). */
    a3s_cgroup_limits cl = {pp.plan->limits.processes, pp.plan->limits.memory_bytes,
                            pp.plan->limits.cpu_millicores};
    if (cl.pids || cl.memory_bytes || cl.cpu_millicores) {
        if (a3s_cgroup_create_noted(quota_caps(sb), &cl, id, record_cgroup, pp.rec, &cg,
                                    err) < 0) {
            a3s_audit_emit(au, "quota", "deny", "capability-missing", "<quota>", NULL);
            goto out;
        }
        l.ncgroup_fds = a3s_cgroup_join_fds(cg, l.cgroup_fds, 4);
    }
    if (sb->process_host) {
        /* SPEC §7: no local boundary; same deadline, kill and bounded output. */
        size_t n = 0;
        argv_buf[n++] = sb->shell;
        argv_buf[n++] = (char *)"-c";
        if (req->shell_command) {
            argv_buf[n++] = (char *)"--"; /* a command starting with '-' is no option */
            argv_buf[n++] = (char *)req->shell_command;
            argv_buf[n] = NULL;
            l.argv = argv_buf;
        } else {
            size_t m = 0;
            while (req->argv[m])
                m++;
            char **v = calloc(m + 5, sizeof *v);
            if (!v) {
                a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
                goto out;
            }
            v[0] = sb->shell;
            v[1] = (char *)"-c";
            v[2] = (char *)"exec \"$@\"";
            v[3] = (char *)"a3s-sandbox";
            memcpy(v + 4, req->argv, m * sizeof *v);
            l.argv = v;
        }
        l.path = sb->shell;
        l.envp = pp.env.v;
        int erc = a3s_exec_run(&l, &o, err);
        if (l.argv != argv_buf)
            free((void *)l.argv);
        if (erc < 0)
            goto out;
        o.started = true;
    } else {
        if (pp.mediated) {
            /* Mediated: the relay and the command may open TCP sockets (to the relay's
             * loopback proxies) and nothing else: AF_UNIX never, even when the policy
             * allows it, since a Unix socket could reach the host past the mediator. The
             * relay talks to the mediator only over the channel made before the sandbox.
             * The plan stays as validated: the filter is exported from a copy. */
            if ((seccomp_fd = export_mediated_filter(&pp.plan->seccomp, err)) < 0 ||
                (cmd_filter_fd = export_mediated_filter(&pp.plan->seccomp, err)) < 0 ||
                start_mediator(sb, &channel_fd, &med, err) < 0)
                goto out;
            record_pid(pp.rec, med.pid);
        } else if ((seccomp_fd = a3s_seccomp_export(&pp.plan->seccomp, err)) < 0) {
            goto out;
        }
        if ((args_fd = a3s_bwrap_args_memfd(&pp.args, err)) < 0 ||
            (setup_fd = a3s_bwrap_args_memfd(&pp.setup, err)) < 0)
            goto out;
        if (pipe2(started, O_CLOEXEC) < 0 || pipe2(status, O_CLOEXEC) < 0) {
            a3s_fail_errno(err, A3S_ERR_SETUP, errno, "exec: pipe2");
            goto out;
        }
        snprintf(fdnum, sizeof fdnum, "%d", A3S_FD_ARGS);
        bargv = calloc(pp.cmd.n + 4, sizeof *bargv);
        if (!bargv) {
            a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
            goto out;
        }
        bargv[0] = sb->bwrap;
        bargv[1] = (char *)"--args";
        bargv[2] = fdnum;
        memcpy(bargv + 3, pp.cmd.v, pp.cmd.n * sizeof *bargv);
        static char *const empty_env[] = {NULL};
        l.path = sb->bwrap;
        l.argv = bargv;
        l.envp = empty_env; /* bwrap itself runs with nothing from the caller */
        l.keep[0] = (a3s_fdmap){started[1], A3S_FD_STARTED};
        l.keep[1] = (a3s_fdmap){status[1], A3S_FD_STATUS};
        l.keep[2] = (a3s_fdmap){args_fd, A3S_FD_ARGS};
        l.keep[3] = (a3s_fdmap){seccomp_fd, A3S_FD_SECCOMP};
        l.keep[4] = (a3s_fdmap){setup_fd, A3S_FD_SETUP};
        l.nkeep = 5;
        if (cmd_filter_fd >= 0)
            l.keep[l.nkeep++] = (a3s_fdmap){cmd_filter_fd, A3S_FD_CMD_FILTER};
        if (channel_fd >= 0)
            l.keep[l.nkeep++] = (a3s_fdmap){channel_fd, A3S_FD_MEDIATOR};
        if (pp.mapped) {
            /* a3s_exec_run consumes these too; the rootid namespace is the sandbox's. */
            int uns = fcntl(sb->rootid.sandbox_ns, F_DUPFD_CLOEXEC, 0);
            if (uns < 0) {
                a3s_fail_errno(err, A3S_ERR_SETUP, errno, "exec: dup");
                goto out;
            }
            l.keep[l.nkeep++] = (a3s_fdmap){pp.ws_mnt, A3S_FD_WS_MOUNT};
            l.keep[l.nkeep++] = (a3s_fdmap){pp.scratch_mnt, A3S_FD_SCRATCH_MOUNT};
            l.keep[l.nkeep++] = (a3s_fdmap){uns, A3S_FD_USERNS};
            pp.ws_mnt = pp.scratch_mnt = -1;
        }
        l.started_fd = started[0];
        l.status_fd = status[0];
        /* a3s_exec_run consumes the keep fds. */
        started[1] = status[1] = args_fd = seccomp_fd = cmd_filter_fd = setup_fd = -1;
        channel_fd = -1;
        if (a3s_exec_run(&l, &o, err) < 0)
            goto out;
        /* Nothing of the command ran: a setup failure, whatever the clock said. */
        if (!o.started && !o.aborted) {
            char why[1536];
            if (o.launch_failed)
                snprintf(why, sizeof why, "the launcher could not start the command: %s",
                         strerror(o.launch_errno));
            else if (o.setup_timed_out || o.timed_out)
                snprintf(why, sizeof why, "it was not up within %d s (a hung bubblewrap?)",
                         A3S_SETUP_LIMIT_MS / 1000);
            else if (o.output_closed)
                snprintf(why, sizeof why, "the caller's output was closed");
            else
                setup_reason(&o, why, sizeof why);
            a3s_fail(err, A3S_ERR_SETUP, "the sandbox could not be set up%s: %s",
                     o.ns_started ? "" : " (namespaces were not created)", why);
            goto out;
        }
    }
    if (o.aborted) {
        rc = A3S_ERR_ABORTED;
        a3s_fail(err, rc, "the command was stopped by its caller; the process tree was killed");
        goto out;
    }
    if (cg)
        a3s_cgroup_events_read(cg, &ev);
    char *med_denials = stop_mediator(&med);
    int frc = fill_result(sb, &pp, &o, timeout_ms, &ev, id, med_denials, r, err);
    free(med_denials);
    if (frc < 0)
        goto out;
    r->output_closed = o.output_closed;
    for (int k = 0; k < 2; k++) {
        const char *hp;
        size_t hn = o.mirror_deferred[k] ? a3s_capture_head(o.cap, k + 1, &hp) : 0;
        if (hn > 0 && (dhead[k] = malloc(hn)) != NULL) {
            memcpy(dhead[k], hp, hn);
            dlen[k] = hn;
        }
    }
    if (r->timed_out)
        a3s_audit_emit(au, "process", "deny", "timeout", "<process-tree>", NULL);
    if (r->truncated)
        a3s_audit_emit(au, "output", "deny", "output-limit", "<output>", NULL);
    if (ev.oom_kills)
        a3s_audit_emit(au, "quota", "deny", "quota-hit", "<quota:memory>", NULL);
    if (ev.pids_max)
        a3s_audit_emit(au, "quota", "deny", "quota-hit", "<quota:processes>", NULL);
    rc = A3S_OK;
out:
    free(stop_mediator(&med));
    if (cmd_filter_fd >= 0)
        close(cmd_filter_fd);
    if (channel_fd >= 0)
        close(channel_fd);
    if (cg && a3s_cgroup_destroy(cg) < 0)
        pp.leftover = true; /* the tree is gone; the directory is left for the sweep */
    free(bargv);
    if (seccomp_fd >= 0)
        close(seccomp_fd);
    if (args_fd >= 0)
        close(args_fd);
    if (setup_fd >= 0)
        close(setup_fd);
    for (int i = 0; i < 2; i++) {
        if (started[i] >= 0)
            close(started[i]);
        if (status[i] >= 0)
            close(status[i]);
    }
    a3s_capture_free(o.cap);
    prepared_free(&pp);
    if (rc == A3S_OK && req->mirror)
        mirror_finish(req, &o, r, dhead, dlen);
    free(dhead[0]);
    free(dhead[1]);
    free(o.mirror_pending);
    if (rc == A3S_OK && r->output_closed)
        a3s_audit_emit(au, "output", "deny", "output-closed", "<output>", NULL);
    /* The sink was opened before anything ran (an unusable audit file refuses the run);
     * a write that fails afterwards cannot undo what ran, so it does not turn the
     * result into an error. */
    a3s_error aerr;
    (void)a3s_audit_close(au, &aerr);
    return rc;
}

void a3s_result_free(a3s_result *r)
{
    if (!r)
        return;
    free(r->stdout_text);
    free(r->stderr_text);
    free(r->stdout_rest);
    free(r->stderr_rest);
    free(r->denials_json);
    free(r->grants_json);
    memset(r, 0, sizeof *r);
}

/* ---- probe, plan, digest, capabilities ------------------------------------------------ */

static int run_probe(a3s_sandbox *sb, const char **identity, a3s_error *err)
{
    static const char *const argv[] = {"printf", "%s", PROBE_MARKER, NULL};
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.argv = argv;
    req.timeout_ms = PROBE_TIMEOUT_MS;
    a3s_result r;
    a3s_error xerr = {0};
    int rc = a3s_sandbox_exec(sb, &req, &r, &xerr);
    if (rc != A3S_OK)
        return a3s_fail(err, rc, "sandbox probe failed: %s", xerr.msg);
    bool good = r.has_exit_code && r.exit_code == 0 && !r.timed_out &&
                strcmp(r.stdout_text, PROBE_MARKER) == 0;
    if (identity)
        *identity = r.identity;
    if (!good)
        a3s_fail(err, A3S_ERR_SETUP,
                 "sandbox probe failed: exit %d%s, stdout '%.200s', stderr '%.400s'",
                 r.has_exit_code ? r.exit_code : -1, r.timed_out ? " (timed out)" : "",
                 r.stdout_text, r.stderr_text);
    a3s_result_free(&r);
    return good ? 0 : -1;
}

/* Used for the process-host opt-in: is the native boundary usable at all? */
static int quick_probe(a3s_sandbox *sb, a3s_error *err)
{
    return run_probe(sb, NULL, err);
}

int a3s_sandbox_probe(a3s_sandbox *sb, a3s_error *err)
{
    if (sb->process_host)
        return a3s_fail(err, A3S_ERR_SETUP, "no local boundary: %s", sb->fallback_reason);
    return run_probe(sb, NULL, err) < 0 ? (err ? err->code : A3S_ERR_SETUP) : A3S_OK;
}

int a3s_sandbox_digest(a3s_sandbox *sb, char out[65], a3s_error *err)
{
    return policy_digest(sb, out, err) < 0 ? (err ? err->code : A3S_ERR_POLICY) : A3S_OK;
}

/* Push every string of sv (host bytes) onto a; -1 on ENOMEM. */
static int push_strv(json_t *a, const a3s_strv *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        if (a3s_json_push(a, a3s_json_cstr(sv->v[i])) < 0)
            return -1;
    return 0;
}

/* Our own JSON text back as a value; NULL when it is NULL (its producer failed). */
static json_t *load_own(const char *text)
{
    json_error_t je;
    return text ? json_loads(text, 0, &je) : NULL;
}

char *a3s_sandbox_plan_json(a3s_sandbox *sb, a3s_error *err)
{
    prepared pp;
    if (prepare(sb, NULL, false, &pp, err) < 0)
        return NULL;
    /* Every member is checked: a failure fails the whole plan (never a plan missing a
     * member, an argv entry or a pin); host text goes through a3s_json_str. */
    json_t *extra = json_object(), *pins = json_array(), *env = json_array();
    char *argv = a3s_bwrap_args_json(sb->bwrap ? sb->bwrap : "bwrap", &pp.args, &pp.cmd);
    char *sc = a3s_seccomp_describe_json(&pp.plan->seccomp);
    char *extra_s = NULL, *out = NULL;
    bool ok = push_strv(pins, &pp.scan.missing_dirs) == 0 &&
              push_strv(pins, &pp.scan.missing_files) == 0 && push_strv(env, &pp.env) == 0;
    /* a3s_json_set takes the value whatever happens: forget each one once passed. */
    if (ok) {
        ok = a3s_json_set(extra, "pins", pins) == 0;
        pins = NULL;
    }
    if (ok) {
        ok = a3s_json_set(extra, "env_result", env) == 0;
        env = NULL;
    }
    ok = ok && a3s_json_set(extra, "policy_digest", a3s_json_cstr(pp.digest)) == 0 &&
         a3s_json_set(extra, "digest", a3s_json_cstr(pp.digest)) == 0 && /* the one that counts */
         a3s_json_set(extra, "backend", a3s_json_cstr(a3s_sandbox_backend(sb))) == 0 &&
         a3s_json_set(extra, "network_grants", grants_array(sb, NULL)) == 0 &&
         (!sb->ngrants || a3s_json_set(extra, "network", json_string("mediated")) == 0) &&
         (sb->process_host || a3s_json_set(extra, "bwrap_argv", load_own(argv)) == 0) &&
         a3s_json_set(extra, "seccomp_filter", load_own(sc)) == 0;
    if (ok)
        extra_s = json_dumps(extra, JSON_COMPACT);
    if (extra_s)
        out = a3s_plan_json(pp.plan, extra_s);
    if (!out)
        a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
    free(extra_s);
    free(argv);
    free(sc);
    json_decref(pins);
    json_decref(env);
    json_decref(extra);
    prepared_free(&pp);
    return out;
}

char *a3s_sandbox_plan_explain(a3s_sandbox *sb, a3s_error *err)
{
    char *json = a3s_sandbox_plan_json(sb, err);
    if (!json)
        return NULL;
    char *text = a3s_plan_explain(json);
    free(json);
    if (!text)
        a3s_fail(err, A3S_ERR_INTERNAL, "plan: out of memory");
    return text;
}

/* Mediated network, proven live: a run with a probe grant whose command asks the relay's
 * HTTP proxy for a host that is not granted (the mediator must answer 403, without any
 * lookup) and greets its SOCKS5 port (the mediator must accept "no authentication"). */
static void probe_mediation(a3s_sandbox *sb, bool *http, bool *socks)
{
    *http = *socks = false;
    if (sb->process_host || !sb->relay || !sb->mediator)
        return;
    a3s_grant probe = {.host = "a3s-probe.invalid", .port = 2};
    a3s_grant *saved = sb->grants;
    size_t nsaved = sb->ngrants;
    sb->grants = &probe;
    sb->ngrants = 1;
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    /* printf escapes, not C ones: the command text has no control bytes. */
    req.shell_command = "exec 3<>/dev/tcp/" A3S_RELAY_ADDR "/" A3S_RELAY_HTTP_PORT
                        " && printf 'CONNECT a3s-probe.invalid:1 HTTP/1.1\\r\\n"
                        "Host: a3s-probe.invalid:1\\r\\n\\r\\n' >&3 && head -c 12 <&3; echo;"
                        "exec 4<>/dev/tcp/" A3S_RELAY_ADDR "/" A3S_RELAY_SOCKS_PORT
                        " && printf '\\005\\001\\000' >&4 &&"
                        " head -c 2 <&4 | od -An -tx1";
    req.timeout_ms = PROBE_TIMEOUT_MS;
    a3s_result r;
    a3s_error xerr = {0};
    if (a3s_sandbox_exec(sb, &req, &r, &xerr) == A3S_OK) {
        *http = r.stdout_text && strstr(r.stdout_text, "HTTP/1.1 403");
        *socks = r.stdout_text && strstr(r.stdout_text, "05 00");
        a3s_result_free(&r);
    }
    sb->grants = saved;
    sb->ngrants = nsaved;
}

char *a3s_sandbox_capabilities_json(a3s_sandbox *sb, a3s_error *err)
{
    char digest[65];
    if (a3s_sandbox_digest(sb, digest, err) != A3S_OK)
        return NULL;
    a3s_error perr = {0};
    const char *identity = NULL;
    bool usable = !sb->process_host && run_probe(sb, &identity, &perr) == 0;
    bool m_http = false, m_socks = false;
    if (usable)
        probe_mediation(sb, &m_http, &m_socks);
    const a3s_cgroup_caps *qc = quota_caps(sb);
    json_t *caps = json_pack(
        "{s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b, s:b}",
        "network_deny_all", usable, "private_network_namespace", usable,
        "readonly_host_root", usable, "seccomp_filter", usable, "pid_namespace", usable,
        "deadline_kill_tree", 1, "output_limit", 1, "environment_sanitized", 1,
        "mediated_http", m_http, "mediated_socks", m_socks, "unix_socket_allowlist", 0,
        "resource_process_limit", qc->can[A3S_QUOTA_PIDS], "resource_memory_limit",
        qc->can[A3S_QUOTA_MEMORY], "resource_cpu_limit", qc->can[A3S_QUOTA_CPU],
        "resource_file_size_limit", 1);
    const char *keys[] = {"network_deny_all", "private_network_namespace", "readonly_host_root",
                          "seccomp_filter", "pid_namespace", "mediated_http", "mediated_socks",
                          "unix_socket_allowlist", "resource_process_limit",
                          "resource_memory_limit", "resource_cpu_limit"};
    /* Every member is checked (a failure fails the report, never drops a member); host
     * text (policy name, paths, reasons) goes through a3s_json_str. */
    json_t *o = json_object(), *unavail = json_array(), *quotas = json_object();
    bool ok = caps != NULL;
    for (size_t i = 0; ok && i < sizeof keys / sizeof keys[0]; i++)
        if (!json_is_true(json_object_get(caps, keys[i])))
            ok = a3s_json_push(unavail, json_string(keys[i])) == 0;
    /* Per quota: how it is enforced here, or why it cannot be. */
    static const char *const qnames[A3S_QUOTA_COUNT] = {"processes", "memory_bytes",
                                                        "cpu_millicores"};
    for (int q = 0; ok && q < A3S_QUOTA_COUNT; q++) {
        json_t *e = json_object();
        ok = a3s_json_set(e, "enforceable", json_boolean(qc->can[q])) == 0 &&
             a3s_json_set(e, qc->can[q] ? "via" : "why_not",
                          a3s_json_cstr(qc->can[q] ? qc->via[q] : qc->why_not[q])) == 0;
        if (ok)
            ok = a3s_json_set(quotas, qnames[q], e) == 0;
        else
            json_decref(e);
    }
    static const char *const rlimit_quotas[] = {"file_size_bytes", "nofile", "core_bytes"};
    for (size_t i = 0; ok && i < sizeof rlimit_quotas / sizeof rlimit_quotas[0]; i++)
        ok = a3s_json_set(quotas, rlimit_quotas[i],
                          json_pack("{s:b, s:s}", "enforceable", 1, "via", "rlimit")) == 0;
    ok = ok && a3s_json_set(o, "backend", a3s_json_cstr(a3s_sandbox_backend(sb))) == 0 &&
         a3s_json_set(o, "policy", a3s_json_cstr(sb->src.name)) == 0 &&
         a3s_json_set(o, "policy_digest", a3s_json_cstr(digest)) == 0 &&
         a3s_json_set(o, "version", a3s_json_cstr(A3S_SANDBOX_VERSION)) == 0 &&
         a3s_json_set(o, "boundary_usable", json_boolean(usable)) == 0 &&
         (usable || a3s_json_set(o, "reason", a3s_json_cstr(sb->process_host
                                                                ? sb->fallback_reason
                                                                : perr.msg)) == 0) &&
         (!sb->bwrap || a3s_json_set(o, "bwrap", a3s_json_cstr(sb->bwrap)) == 0) &&
         /* Who commands run as on the host: "caller", "mapped" (root callers: an
          * unprivileged id, via idmapped mounts) or "host-root" (only with
          * allow_host_root). */
         (!identity || a3s_json_set(o, "identity", a3s_json_cstr(identity)) == 0);
    /* a3s_json_set takes the value whatever happens: forget each one once passed. */
    if (ok) {
        ok = a3s_json_set(o, "capabilities", caps) == 0;
        caps = NULL;
    }
    if (ok) {
        ok = a3s_json_set(o, "unavailable", unavail) == 0;
        unavail = NULL;
    }
    if (ok) {
        ok = a3s_json_set(o, "quotas", quotas) == 0;
        quotas = NULL;
    }
    char *s = ok ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(caps);
    json_decref(unavail);
    json_decref(quotas);
    json_decref(o);
    if (!s)
        a3s_fail(err, A3S_ERR_INTERNAL, "capabilities: out of memory");
    return s;
}

int a3s_sandbox_replace_policy(a3s_sandbox *sb, const char *policy, bool allow_broadening,
                               a3s_error *err)
{
    if (!policy)
        return a3s_fail(err, A3S_ERR_INVALID, "replace_policy: no policy given"), A3S_ERR_INVALID;
    a3s_policy_src next_src = {0};
    if (a3s_policy_resolve(policy, (const char *const *)sb->search_path.v, &next_src, err) < 0)
        return err ? err->code : A3S_ERR_POLICY;
    if (policy_outside_workspace(sb, &next_src, err) < 0) {
        a3s_policy_src_free(&next_src);
        return err ? err->code : A3S_ERR_POLICY;
    }
    /* Both evaluated against one context, so only the policies differ. */
    char *scratch = NULL;
    a3s_plan *cur = NULL, *next = NULL;
    int rc = A3S_ERR_INTERNAL;
    if (asprintf(&scratch, "%s/a3s-sandbox-XXXXXX", sb->tmp) < 0) {
        a3s_fail(err, rc, "out of memory");
        goto out;
    }
    if (!(cur = compile(sb, scratch, err))) {
        rc = err ? err->code : A3S_ERR_POLICY;
        goto out;
    }
    a3s_policy_src saved = sb->src;
    sb->src = next_src;
    next = compile(sb, scratch, err);
    sb->src = saved;
    if (!next) {
        rc = err ? err->code : A3S_ERR_POLICY;
        goto out;
    }
    char why[512];
    if (!allow_broadening && a3s_plan_broadens(cur, next, why, sizeof why)) {
        rc = A3S_ERR_POLICY;
        a3s_fail(err, rc, "policy update broadens the sandbox: %s (%s -> %s); set "
                 "allow_broadening to accept it", why, cur->name, next->name);
        goto out;
    }
    a3s_policy_src_free(&sb->src);
    sb->src = next_src;
    memset(&next_src, 0, sizeof next_src);
    sb->digest[0] = '\0'; /* a new policy, a new digest */
    rc = A3S_OK;
out:
    a3s_policy_src_free(&next_src);
    a3s_plan_free(cur);
    a3s_plan_free(next);
    free(scratch);
    return rc;
}

int a3s_policy_check(const char *policy, const char *workspace, a3s_error *err)
{
    a3s_options o = {.workspace = workspace, .policy = policy};
    a3s_sandbox *sb = a3s_sandbox_new(&o, err);
    if (!sb)
        return err ? err->code : A3S_ERR_POLICY;
    a3s_sandbox_free(sb);
    return A3S_OK;
}
