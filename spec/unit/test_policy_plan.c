/* Policy runtime: resolving a policy, the baseline's plan and its provenance, host
 * queries, seccomp settings and a bad context (spec/unit/policy_fixture.h). TAP output. */
#include "policy_fixture.h"

/* ------------------------------------------------------------------ tests */

static void test_resolve(void)
{
    a3s_policy_src src;
    a3s_error err = {0};
    int rc = a3s_policy_resolve("baseline", search, &src, &err);
    ok(rc == 0, "resolve baseline by name (%s)", rc ? err.msg : "ok");
    if (rc == 0) {
        ok_streq(src.name, "baseline", "resolved name");
        ok(ends_with(src.path, "/policies/baseline.lua"), "resolved path %s", src.path);
        ok(src.text && strstr(src.text, "a3s.plan(\"baseline\")"), "policy text read");
        a3s_policy_src_free(&src);
        ok(!src.name && !src.path && !src.text, "src_free clears");
    }

    rc = a3s_policy_resolve("no_such_policy", search, &src, &err);
    ok(rc < 0 && err.code == A3S_ERR_POLICY && strstr(err.msg, "not found"),
       "unknown name refused: %s", err.msg);
    rc = a3s_policy_resolve(".hidden", search, &src, &err);
    ok(rc < 0 && err.code == A3S_ERR_POLICY, "name starting with '.' refused: %s", err.msg);
    rc = a3s_policy_resolve("/nonexistent/x.lua", search, &src, &err);
    ok(rc < 0 && err.code == A3S_ERR_POLICY && strstr(err.msg, "/nonexistent/x.lua"),
       "missing file refused: %s", err.msg);
    rc = a3s_policy_resolve(pol, search, &src, &err); /* a directory */
    ok(rc < 0 && strstr(err.msg, "not a regular file"), "directory refused: %s", err.msg);

    char p[PATH_MAX];
    sub(p, pol, "nul.lua");
    write_file(p, "return 1\0 + 1", 13);
    rc = a3s_policy_resolve(p, search, &src, &err);
    ok(rc < 0 && strstr(err.msg, "NUL"), "file with a NUL byte refused: %s", err.msg);

    sub(p, pol, "big.lua");
    size_t big = (1u << 20) + 1;
    char *text = malloc(big);
    if (text) {
        memset(text, '-', big);
        write_file(p, text, big);
        free(text);
    }
    rc = a3s_policy_resolve(p, search, &src, &err);
    ok(rc < 0 && strstr(err.msg, "larger than"), "file over 1 MiB refused: %s", err.msg);

    sub(p, pol, "mine.lua");
    write_file(p, "return a3s.plan('mine')\n", 24);
    rc = a3s_policy_resolve(p, search, &src, &err);
    ok(rc == 0 && strcmp(src.name, "mine") == 0, "file name without .lua is the name");
    if (rc == 0)
        a3s_policy_src_free(&src);
    rc = a3s_policy_resolve("mine", search, &src, &err); /* second search dir */
    ok(rc == 0 && ends_with(src.path, "/pol/mine.lua"), "name found in a later search dir");
    if (rc == 0)
        a3s_policy_src_free(&src);
}

static void test_baseline(void)
{
    a3s_error err = {0};
    a3s_plan *p = eval_name("baseline", &ctx, &err);
    ok(p != NULL, "baseline evaluates (%s)", p ? "ok" : err.msg);
    if (!p)
        return;
    char x[PATH_MAX], y[PATH_MAX];

    ok_streq(p->name, "baseline", "plan name");
    ok(ends_with(p->source, "/policies/baseline.lua"), "plan source %s", p->source);
    ok_streq(p->workspace, ws, "roots set: workspace");
    ok_streq(p->home, home, "roots set: home");
    ok(p->network == A3S_NET_NONE && p->network_prov.file, "network none, with provenance");

    ok(find_fs(p, A3S_FS_RW, ws) != NULL, "workspace writable");
    ok(find_fs(p, A3S_FS_RW, scratch) != NULL, "scratch writable");
    const a3s_fs_rule *r = find_fs(p, A3S_FS_HIDE, home);
    ok(r && r->optional && !r->discovered, "home hidden (optional, declared)");
    ok(find_fs(p, A3S_FS_HIDE, tmpd) != NULL, "host temp dir hidden");
    ok(find_fs(p, A3S_FS_TMPFS, "/tmp") != NULL, "/tmp is a private tmpfs");
    ok(!find_fs(p, A3S_FS_HIDE, "/tmp"), "/tmp not also hidden");
    ok(find_fs(p, A3S_FS_HIDE, "/root") && find_fs(p, A3S_FS_HIDE, "/home") &&
           find_fs(p, A3S_FS_HIDE, "/run"),
       "/root, /home, /run hidden");
    char vr[PATH_MAX];
    if (realpath("/var/run", vr) && strcmp(vr, "/var/run") != 0)
        ok(!any_fs(p, "/var/run"), "/var/run is a symlink here: no rule declared on it");
    else
        ok(find_fs(p, A3S_FS_HIDE, "/var/run") != NULL, "/var/run hidden");
    ok(find_fs(p, A3S_FS_MASK, "/etc/shadow") && find_fs(p, A3S_FS_MASK, "/etc/gshadow") &&
           find_fs(p, A3S_FS_MASK, "/etc/ssl/private") && find_fs(p, A3S_FS_MASK, "/run/secrets"),
       "system secrets masked");
    ok(find_fs(p, A3S_FS_MASK, "/etc/sudoers") != NULL, "/etc/sudoers masked");

    sub(x, home, ".ssh");
    r = find_fs(p, A3S_FS_MASK, x);
    ok(r && r->optional && !r->discovered, "<home>/.ssh masked");
    sub(x, home, "Library/Application Support/kimi-desktop/daimon-share");
    ok(find_fs(p, A3S_FS_MASK, x) != NULL, "home credential with a space masked");
    size_t nhome = 0;
    for (size_t i = 0; i < p->nfs; i++)
        if (p->fs[i].kind == A3S_FS_MASK && a3s_path_within(p->fs[i].path, home) &&
            strcmp(p->fs[i].path, home) != 0)
            nhome++;
    ok(nhome == 36, "all 36 home-relative credentials masked (%zu)", nhome);
    sub(x, base_dir, "codex/auth.json"); /* CODEX_HOME had a trailing '/' */
    r = find_fs(p, A3S_FS_MASK, x);
    ok(r && r->discovered, "env-configured credential masked (discovered): %s", x);
    sub(x, ws, ".git-credentials");
    ok(find_fs(p, A3S_FS_MASK, x) != NULL, "workspace .git-credentials masked");
    sub(x, ws, ".a3s/loops");
    r = find_fs(p, A3S_FS_RW, x);
    ok(r && r->optional, ".a3s/loops carve-out (optional)");

    sub(x, home, ".cargo/bin");
    r = find_fs(p, A3S_FS_RO, x);
    ok(r && r->discovered && r->optional, "PATH dir under the home re-exposed read-only");
    sub(x, home, ".cargo");
    ok(find_fs(p, A3S_FS_RO, x) != NULL, "toolchain root derived from PATH (.cargo)");
    sub(x, home, ".rustup");
    ok(find_fs(p, A3S_FS_RO, x) != NULL, "sibling .rustup re-exposed");
    if (realpath("/usr/bin", y)) {
        size_t n = 0;
        for (size_t i = 0; i < p->nfs; i++)
            if (p->fs[i].kind == A3S_FS_RO && strcmp(p->fs[i].path, y) == 0)
                n++;
        ok(n == 1, "PATH dirs canonical and deduplicated (%s once)", y);
    }
    ok(!any_fs(p, "/nonexistent") && !any_fs(p, "/ignored/second/entry"),
       "missing PATH entries and the second PATH ignored");
    ok(!find_fs(p, A3S_FS_RO, home), "the hidden home itself is never re-exposed");

    ok(p->protect_dirs.n == 7 && has_name(&p->protect_dirs, ".git") &&
           has_name(&p->protect_dirs, ".idea"),
       "7 protected dirs");
    ok(p->protect_files.n == 8 && has_name(&p->protect_files, ".mcp.json") &&
           has_name(&p->protect_files, ".profile"),
       "8 protected files");
    ok(p->secret_prefixes.n == 5 && has_name(&p->secret_prefixes, ".env") &&
           has_name(&p->secret_prefixes, ".npmrc") && has_name(&p->secret_prefixes, ".git-credentials"),
       "secret prefixes .env and the credential files tools read from subdirectories");
    ok(p->scan_skip.n == 3 && has_name(&p->scan_skip, "node_modules"), "scan skips");

    ok(p->env.keep.n == 54 && has_name(&p->env.keep, "PATH") && has_name(&p->env.keep, "LC_ALL"),
       "env keep: the safe keys (%zu)", p->env.keep.n);
    ok(has_name(&p->env.keep_prefix, "LC_"), "env keep prefix LC_");
    ok(has_name(&p->env.strip, "BASH_ENV") && has_name(&p->env.strip, "NODE_OPTIONS") &&
           has_name(&p->env.strip, "https_proxy") &&
           has_name(&p->env.strip, "A3S_SANDBOX_MEDIATOR_PIPE") &&
           has_name(&p->env.strip, "SHELLOPTS") && has_name(&p->env.strip, "GCONV_PATH"),
       "env strip: bootstrap, proxies, mediator, ★ injection");
    ok(has_name(&p->env.strip_prefix, "GIT_") && has_name(&p->env.strip_prefix, "BASH_FUNC_") &&
           has_name(&p->env.strip_prefix, "LUA_INIT_"),
       "env strip prefixes");
    ok_streq(env_set_value(p, "HOME"), scratch, "HOME re-homed to scratch");
    ok_streq(env_set_value(p, "XDG_STATE_HOME"), scratch, "XDG_STATE_HOME re-homed");
    size_t declared = 0;
    for (size_t i = 0; i < p->env.nset; i++)
        declared += !p->env.set[i].discovered;
    ok(declared == 11, "11 re-homed variables (host-derived toolchain homes aside)");

    const a3s_sc_rule *sc = find_deny(p, "keyctl");
    ok(sc && sc->errnum == EPERM, "seccomp denies keyctl with EPERM");
    sc = find_deny(p, "clone3");
    ok(sc && sc->errnum == ENOSYS, "clone3 -> ENOSYS");
    sc = find_deny(p, "fsopen");
    ok(sc && sc->errnum == ENOSYS, "new mount API -> ENOSYS");
    ok(find_deny(p, "io_uring_setup") && find_deny(p, "linkat") && find_deny(p, "bpf") &&
           find_deny(p, "userfaultfd") && find_deny(p, "unshare"),
       "other denied syscalls");
    ok(!find_deny(p, "ptrace"), "ptrace stays allowed");
    ok(p->seccomp.nsocket_allow == 0 && p->seccomp.socketpair_unix && p->seccomp.deny_clone_ns &&
           p->seccomp.deny_tty_inject && p->seccomp.socket_errnum == EAFNOSUPPORT,
       "seccomp booleans and socket policy");

    ok(p->limits.timeout_ms == 120000 && p->limits.output_bytes == 102400 &&
           p->limits.nofile == 1024 && p->limits.core_bytes == 0 && p->limits.scan_depth == 64 &&
           p->limits.scan_entries == 1000000,
       "limits");

    /* Provenance: the home hide comes from a `plan:hide` line of baseline.lua. */
    r = find_fs(p, A3S_FS_HIDE, home);
    char line[512] = "";
    bool prov_ok = r && r->prov.file && ends_with(r->prov.file, "/policies/baseline.lua") &&
                   r->prov.line > 0 && file_line(r->prov.file, r->prov.line, line, sizeof line) &&
                   strstr(line, "plan:hide(");
    ok(prov_ok, "provenance %s:%d points at a plan:hide line", r && r->prov.file ? r->prov.file : "?",
       r ? r->prov.line : 0);
    ok(p->limits.prov.file && ends_with(p->limits.prov.file, "baseline.lua") &&
           p->limits.prov.line > 0,
       "limits provenance");
    a3s_name *kn = p->env.keep.n ? &p->env.keep.v[0] : NULL;
    ok(kn && kn->prov.file && ends_with(kn->prov.file, "baseline.lua"),
       "env list provenance is the baseline line that declared it");

    /* Digest: taken of the evaluation against the neutral host (no host facts at all;
     * discovered rules are not exempt from it), so another workspace, home and PATH give
     * the same digest. */
    char d1[65], d2[65];
    a3s_policy_ctx c1 = ctx;
    c1.neutral = true;
    a3s_plan *p1 = eval_name("baseline", &c1, &err);
    ok(p1 && a3s_plan_digest(p1, d1, &err) == 0, "digest computed");
    size_t ndisc = 0;
    for (size_t i = 0; p1 && i < p1->nfs; i++)
        ndisc += p1->fs[i].discovered;
    for (size_t i = 0; p1 && i < p1->env.nset; i++)
        ndisc += p1->env.set[i].discovered;
    ok(p1 && ndisc == 0, "the neutral host has no host facts: no discovered rule (%zu)", ndisc);
    a3s_plan_free(p1);
    a3s_policy_ctx c2 = ctx;
    c2.neutral = true;
    const char *env2[] = {"PATH=/usr/local/bin:/bin", NULL};
    char ws2[PATH_MAX], home2[PATH_MAX];
    sub(ws2, base_dir, "outside");
    sub(home2, base_dir, "globdir");
    c2.workspace = ws2;
    c2.home = home2;
    c2.host_env = env2;
    a3s_plan *p2 = eval_name("baseline", &c2, &err);
    ok(p2 && a3s_plan_digest(p2, d2, &err) == 0 && strcmp(d1, d2) == 0,
       "same digest for another workspace, home and PATH");
    a3s_plan_free(p2);
    a3s_plan_free(p);
}

static void test_host_queries(void)
{
    char text[16 * PATH_MAX];
    FMT(text,
             "local h = a3s.host\n"
             "local l = h.glob_prefix('%s/globdir', 'sud')\n"
             "assert(#l == 2, 'count ' .. #l)\n"
             "assert(l[1] == '%s/globdir/sudoers' and l[2] == '%s/globdir/sudoers.d', l[1])\n"
             "assert(#h.glob_prefix('%s/missing', 'x') == 0)\n"
             "assert(h.exists('%s/.ssh') and h.is_dir('%s/.ssh'))\n"
             "assert(not h.exists('%s/nope') and not h.is_dir('%s/globdir/other'))\n"
             "assert(h.realpath('%s/./.ssh/..') == '%s')\n"
             "assert(h.realpath('%s/nope') == nil)\n"
             "assert(#ctx.path_dirs >= 2 and ctx.path_dirs[1] == '%s/.cargo/bin')\n"
             "assert(ctx.env.BASH_ENV == '/tmp/evil' and ctx.platform == 'linux')\n"
             "assert(table.concat(ctx.path_dirs, ':'):find('/.cargo/bin', 1, true))\n"
             "local n = 0; for k, v in pairs(ctx.env) do n = n + 1 end; assert(n == 4)\n"
             "return a3s.plan('hostq')\n",
             base_dir, base_dir, base_dir, base_dir, home, home, home, base_dir, home, home,
             home, home);
    expect_ok("host queries (glob_prefix, exists, is_dir, realpath, ctx)", text);
    expect_fail("host query with a relative path",
                "a3s.host.exists('etc/passwd') return a3s.plan('x')", "absolute path expected");
}

static void test_seccomp_families(void)
{
    a3s_error err = {0};
    a3s_plan *p = eval_text("fam.lua",
                            "local p = a3s.plan('fam')\n"
                            "p:seccomp{ socket_families = { 'AF_INET', 'AF_UNIX' }, "
                            "socketpair_unix = false, socket_errno = 'EPERM' }\n"
                            "p:seccomp{ deny_tty_inject = false }\n"
                            "return p\n",
                            &err);
    ok(p && p->seccomp.nsocket_allow == 2 && !p->seccomp.socketpair_unix &&
           !p->seccomp.deny_tty_inject && p->seccomp.deny_clone_ns &&
           p->seccomp.socket_errnum == EPERM && p->seccomp.prov.line == 3,
       "seccomp{} sets only the given keys (%s)", p ? "ok" : err.msg);
    a3s_plan_free(p);
    p = eval_text("fam.lua",
                  "local p = a3s.plan('fam')\n"
                  "p:seccomp{ socket_families = { 'AF_INET' } }\n"
                  "p:seccomp{ socket_families = {} }\n"
                  "return p\n",
                  &err);
    ok(p && p->seccomp.nsocket_allow == 0, "socket_families replaces the list");
    a3s_plan_free(p);
}

static void test_bad_context(void)
{
    a3s_error err = {0};
    a3s_policy_ctx c = ctx;
    c.home = "relative";
    a3s_plan *p = eval_name("baseline", &c, &err);
    ok(!p && err.code == A3S_ERR_INVALID && strstr(err.msg, "home"),
       "unclean context root refused: %s", err.msg);
    c = ctx;
    const char *empty[] = {NULL};
    c.search_path = empty;
    char f[PATH_MAX];
    sub(f, pol, "needsbase.lua");
    write_file(f, "return a3s.extend('baseline', 'x')\n", 35);
    a3s_policy_src src;
    if (a3s_policy_resolve(f, empty, &src, &err) == 0) {
        p = a3s_policy_eval(&src, &c, &err);
        ok(!p && strstr(err.msg, "not found in the policy search path"),
           "extend with an empty search path: %s", err.msg);
        a3s_policy_src_free(&src);
    }
}

int main(void)
{
    find_policies_dir();
    printf("# policies: %s\n", policies_dir);
    setup();
    test_resolve();
    test_baseline();
    test_host_queries();
    test_seccomp_families();
    test_bad_context();
    teardown();
    return tap_done();
}
