/* Unit tests of engine/plan: the canonical form (the digest) and the full JSON stay in
 * step with the model, one field changed at a time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <jansson.h>

#include "plan.h"
#include "plan_fixture.h"
#include "tap.h"
#include "util.h"

static a3s_error merr; /* the builders' error inside a mutation */

/* ------------------------------------------------------------------ the two forms in step */

/* A plan with every field of the model set, away from its default where it has one.
 * Each root has one rule below it, so moving a root with its rules keeps the digest. */
static a3s_plan *rich_plan(void)
{
    a3s_error e = {0};
    a3s_plan *p = a3s_plan_new();
    if (!p)
        abort();
    p->name = strdup("rich");
    p->source = strdup("policies/rich.lua");
    p->network_prov.file = strdup("rich.lua");
    p->network_prov.line = 1;
    p->allow_host_root = true;
    p->host_root_prov.file = strdup("rich.lua");
    p->host_root_prov.line = 2;
    must(a3s_plan_set_roots(p, "/w", "/s", "/h", "/t", &e), &e);
    must(a3s_plan_add_fs(p, A3S_FS_RW, "/w", false, false, "rich.lua", 3, &e), &e);
    must(a3s_plan_add_fs(p, A3S_FS_RW, "/s", false, false, "rich.lua", 4, &e), &e);
    must(a3s_plan_add_fs(p, A3S_FS_HIDE, "/h", true, false, "rich.lua", 5, &e), &e);
    must(a3s_plan_add_fs(p, A3S_FS_TMPFS, "/t", false, false, "rich.lua", 6, &e), &e);
    /* fs[4]: every flag set */
    must(a3s_plan_add_fs(p, A3S_FS_RW, "/opt", true, true, "rich.lua", 7, &e), &e);
    p->fs[4].broaden = true;
    add_name(&p->protect_dirs, ".git", "rich.lua", 8);
    add_name(&p->protect_files, ".gitmodules", "rich.lua", 9);
    add_name(&p->secret_prefixes, ".env", "rich.lua", 10);
    add_name(&p->scan_skip, "node_modules", "rich.lua", 11);
    add_name(&p->env.keep, "PATH", "rich.lua", 12);
    add_name(&p->env.keep_prefix, "LC_", "rich.lua", 13);
    add_name(&p->env.strip, "LD_PRELOAD", "rich.lua", 14);
    add_name(&p->env.strip_prefix, "BASH_FUNC_", "rich.lua", 15);
    must(a3s_plan_env_set(p, "HOME", "/s/home:/usr/bin", "rich.lua", 16, &e), &e);
    p->env.set[0].discovered = true;
    must(a3s_plan_seccomp_deny(p, "clone3", ENOSYS, "rich.lua", 17, &e), &e);
    must(a3s_plan_seccomp_allow_family(p, AF_UNIX, &e), &e);
    p->seccomp.socketpair_unix = false;
    p->seccomp.deny_clone_ns = false;
    p->seccomp.deny_tty_inject = false;
    p->seccomp.socket_errnum = EACCES;
    p->seccomp.prov.file = strdup("rich.lua");
    p->seccomp.prov.line = 18;
    p->limits = (a3s_limits){.timeout_ms = 1000,
                             .output_bytes = 2000,
                             .nofile = 300,
                             .core_bytes = 4000,
                             .scan_depth = 5,
                             .scan_entries = 6000,
                             .processes = 70,
                             .memory_bytes = (int64_t)80 << 20,
                             .cpu_millicores = 900,
                             .file_size_bytes = 10000,
                             .prov = {.file = strdup("rich.lua"), .line = 19}};
    return p;
}

static void set_str(char **s, const char *v)
{
    free(*s);
    *s = strdup(v);
}

/* Declarations: in both forms. */
static void w_name(a3s_plan *p) { set_str(&p->name, "rich2"); }
static void w_network(a3s_plan *p) { p->network = 1; }
static void w_host_root(a3s_plan *p) { p->allow_host_root = false; }
static void w_fs_kind(a3s_plan *p) { p->fs[4].kind = A3S_FS_RO; }
static void w_fs_path(a3s_plan *p) { set_str(&p->fs[4].path, "/opt2"); }
static void w_fs_optional(a3s_plan *p) { p->fs[4].optional = false; }
static void w_fs_broaden(a3s_plan *p) { p->fs[4].broaden = false; }
static void w_fs_add(a3s_plan *p)
{
    must(a3s_plan_add_fs(p, A3S_FS_MASK, "/etc/shadow", true, false, NULL, 0, &merr), &merr);
}
static void w_protect_dir(a3s_plan *p) { set_str(&p->protect_dirs.v[0].name, ".hg"); }
static void w_protect_file(a3s_plan *p) { set_str(&p->protect_files.v[0].name, ".bashrc"); }
static void w_secret(a3s_plan *p) { set_str(&p->secret_prefixes.v[0].name, ".npmrc"); }
static void w_scan_skip(a3s_plan *p) { set_str(&p->scan_skip.v[0].name, "target"); }
static void w_keep(a3s_plan *p) { set_str(&p->env.keep.v[0].name, "TERM"); }
static void w_keep_prefix(a3s_plan *p) { set_str(&p->env.keep_prefix.v[0].name, "XDG_"); }
static void w_strip(a3s_plan *p) { set_str(&p->env.strip.v[0].name, "LD_AUDIT"); }
static void w_strip_prefix(a3s_plan *p) { set_str(&p->env.strip_prefix.v[0].name, "GIT_"); }
static void w_name_add(a3s_plan *p) { add_name(&p->env.keep, "LANG", NULL, 0); }
static void w_set_name(a3s_plan *p) { set_str(&p->env.set[0].name, "TMPDIR"); }
static void w_set_value(a3s_plan *p) { set_str(&p->env.set[0].value, "/s/home:/bin"); }
static void w_set_add(a3s_plan *p)
{
    must(a3s_plan_env_set(p, "LANG", "C", NULL, 0, &merr), &merr);
}
static void w_deny_syscall(a3s_plan *p) { set_str(&p->seccomp.deny[0].syscall, "bpf"); }
static void w_deny_errno(a3s_plan *p) { p->seccomp.deny[0].errnum = EPERM; }
static void w_deny_add(a3s_plan *p)
{
    must(a3s_plan_seccomp_deny(p, "bpf", EPERM, NULL, 0, &merr), &merr);
}
static void w_family(a3s_plan *p) { p->seccomp.socket_allow[0] = AF_INET; }
static void w_family_add(a3s_plan *p)
{
    must(a3s_plan_seccomp_allow_family(p, AF_INET6, &merr), &merr);
}
static void w_socketpair(a3s_plan *p) { p->seccomp.socketpair_unix = true; }
static void w_clone_ns(a3s_plan *p) { p->seccomp.deny_clone_ns = true; }
static void w_tty(a3s_plan *p) { p->seccomp.deny_tty_inject = true; }
static void w_sock_errno(a3s_plan *p) { p->seccomp.socket_errnum = EPERM; }
static void w_timeout(a3s_plan *p) { p->limits.timeout_ms++; }
static void w_output(a3s_plan *p) { p->limits.output_bytes++; }
static void w_nofile(a3s_plan *p) { p->limits.nofile++; }
static void w_core(a3s_plan *p) { p->limits.core_bytes++; }
static void w_depth(a3s_plan *p) { p->limits.scan_depth++; }
static void w_entries(a3s_plan *p) { p->limits.scan_entries++; }
static void w_processes(a3s_plan *p) { p->limits.processes++; }
static void w_memory(a3s_plan *p) { p->limits.memory_bytes++; }
static void w_cpu(a3s_plan *p) { p->limits.cpu_millicores++; }
static void w_fsize(a3s_plan *p) { p->limits.file_size_bytes++; }

/* Full form only: provenance, labels, the source, the roots (the canonical form writes
 * them into the paths: moving a root with its rules keeps the digest). */
static void w_source(a3s_plan *p) { set_str(&p->source, "policies/other.lua"); }
static void w_network_prov(a3s_plan *p) { p->network_prov.line++; }
static void w_fs_discovered(a3s_plan *p) { p->fs[4].discovered = false; }
static void w_fs_prov_line(a3s_plan *p) { p->fs[4].prov.line++; }
static void w_fs_prov_file(a3s_plan *p) { set_str(&p->fs[4].prov.file, "other.lua"); }
static void w_name_prov(a3s_plan *p) { p->protect_dirs.v[0].prov.line++; }
static void w_env_name_prov(a3s_plan *p) { p->env.strip_prefix.v[0].prov.line++; }
static void w_set_discovered(a3s_plan *p) { p->env.set[0].discovered = false; }
static void w_set_prov(a3s_plan *p) { p->env.set[0].prov.line++; }
static void w_deny_prov(a3s_plan *p) { p->seccomp.deny[0].prov.line++; }
static void w_seccomp_prov(a3s_plan *p) { p->seccomp.prov.line++; }
static void w_limits_prov(a3s_plan *p) { p->limits.prov.line++; }
static void w_move_root(a3s_plan *p, const char *to, char **root, size_t rule)
{
    set_str(root, to);
    set_str(&p->fs[rule].path, to);
}
static void w_workspace(a3s_plan *p) { w_move_root(p, "/w2", &p->workspace, 0); }
static void w_scratch(a3s_plan *p)
{
    w_move_root(p, "/s2", &p->scratch, 1);
    set_str(&p->env.set[0].value, "/s2/home:/usr/bin");
}
static void w_home(a3s_plan *p) { w_move_root(p, "/h2", &p->home, 2); }
static void w_tmp(a3s_plan *p) { w_move_root(p, "/t2", &p->tmp, 3); }

/* The full plan without its digest member (which changes with the canonical form). */
static json_t *full_sans_digest(const a3s_plan *p)
{
    char *s = a3s_plan_json(p, NULL, 0, NULL);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    if (j)
        json_object_del(j, "digest");
    return j;
}

/* The canonical form (the digest) and the full plan come from one walker over the model;
 * this keeps it honest: changing any one field of a plan that has every field set shows
 * in the full plan, and in the digest exactly when the field is a declaration. A field
 * that a form leaves out by mistake fails here. */
static void test_forms_in_step(void)
{
    static const struct {
        const char *what;
        mutation_fn fn;
        bool decl; /* a declaration: in the digest too */
    } muts[] = {
        {"name", w_name, true},
        {"network", w_network, true},
        {"allow_host_root", w_host_root, true},
        {"fs kind", w_fs_kind, true},
        {"fs path", w_fs_path, true},
        {"fs optional", w_fs_optional, true},
        {"fs broaden", w_fs_broaden, true},
        {"fs rule added", w_fs_add, true},
        {"protect_dirs name", w_protect_dir, true},
        {"protect_files name", w_protect_file, true},
        {"secret_prefixes name", w_secret, true},
        {"scan_skip name", w_scan_skip, true},
        {"env keep name", w_keep, true},
        {"env keep_prefix name", w_keep_prefix, true},
        {"env strip name", w_strip, true},
        {"env strip_prefix name", w_strip_prefix, true},
        {"name added", w_name_add, true},
        {"env set name", w_set_name, true},
        {"env set value", w_set_value, true},
        {"env set added", w_set_add, true},
        {"seccomp deny syscall", w_deny_syscall, true},
        {"seccomp deny errno", w_deny_errno, true},
        {"seccomp deny added", w_deny_add, true},
        {"seccomp socket family", w_family, true},
        {"seccomp socket family added", w_family_add, true},
        {"seccomp socketpair_unix", w_socketpair, true},
        {"seccomp deny_clone_ns", w_clone_ns, true},
        {"seccomp deny_tty_inject", w_tty, true},
        {"seccomp socket errno", w_sock_errno, true},
        {"limit timeout_ms", w_timeout, true},
        {"limit output_bytes", w_output, true},
        {"limit nofile", w_nofile, true},
        {"limit core_bytes", w_core, true},
        {"limit scan_depth", w_depth, true},
        {"limit scan_entries", w_entries, true},
        {"limit processes", w_processes, true},
        {"limit memory_bytes", w_memory, true},
        {"limit cpu_millicores", w_cpu, true},
        {"limit file_size_bytes", w_fsize, true},
        {"source", w_source, false},
        {"network provenance", w_network_prov, false},
        {"fs discovered label", w_fs_discovered, false},
        {"fs provenance line", w_fs_prov_line, false},
        {"fs provenance file", w_fs_prov_file, false},
        {"name provenance", w_name_prov, false},
        {"env name provenance", w_env_name_prov, false},
        {"env set discovered label", w_set_discovered, false},
        {"env set provenance", w_set_prov, false},
        {"seccomp deny provenance", w_deny_prov, false},
        {"seccomp provenance", w_seccomp_prov, false},
        {"limits provenance", w_limits_prov, false},
        {"workspace root moved with its rule", w_workspace, false},
        {"scratch root moved with its rule and value", w_scratch, false},
        {"home root moved with its rule", w_home, false},
        {"tmp root moved with its rule", w_tmp, false},
    };
    a3s_error e = {0};
    a3s_plan *base = rich_plan();
    char d0[65];
    must(a3s_plan_digest(base, d0, &e), &e);
    json_t *j0 = full_sans_digest(base);
    ok(j0 != NULL, "full plan of the rich plan");
    a3s_plan_free(base);

    for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
        a3s_plan *p = rich_plan();
        muts[i].fn(p);
        char d[65];
        must(a3s_plan_digest(p, d, &e), &e);
        json_t *j = full_sans_digest(p);
        ok(j && !json_equal(j, j0), "full plan changes: %s", muts[i].what);
        if (muts[i].decl)
            ok(strcmp(d, d0) != 0, "digest changes: %s", muts[i].what);
        else
            ok(strcmp(d, d0) == 0, "digest unchanged: %s", muts[i].what);
        json_decref(j);
        a3s_plan_free(p);
    }
    /* Where allow_host_root was set is in neither form (so far), nor is the frozen state
     * of the plan object: the only fields not written. */
    a3s_plan *p = rich_plan();
    p->host_root_prov.line++;
    p->frozen = p->env.keep.frozen = true;
    json_t *j = full_sans_digest(p);
    char d[65];
    must(a3s_plan_digest(p, d, &e), &e);
    ok(j && json_equal(j, j0) && strcmp(d, d0) == 0,
       "host_root_prov and the frozen flags are in neither form");
    json_decref(j);
    a3s_plan_free(p);
    json_decref(j0);

#if defined(__x86_64__) || defined(__aarch64__)
    /* A tripwire: a field added to the model must be added to the walker
     * (engine/plan_encode.c) and to the mutations above; then update these sizes. */
    ok(sizeof(a3s_plan) == 576 && sizeof(a3s_fs_rule) == 40 && sizeof(a3s_name) == 24 &&
           sizeof(a3s_name_list) == 32 && sizeof(a3s_kv) == 40 && sizeof(a3s_sc_rule) == 32 &&
           sizeof(a3s_seccomp_plan) == 72 && sizeof(a3s_limits) == 96 &&
           sizeof(a3s_env_plan) == 152 && sizeof(a3s_prov) == 16,
       "the plan model has the fields the walker and this test know (sizes %zu %zu %zu %zu "
       "%zu %zu %zu %zu %zu %zu)",
       sizeof(a3s_plan), sizeof(a3s_fs_rule), sizeof(a3s_name), sizeof(a3s_name_list),
       sizeof(a3s_kv), sizeof(a3s_sc_rule), sizeof(a3s_seccomp_plan), sizeof(a3s_limits),
       sizeof(a3s_env_plan), sizeof(a3s_prov));
#endif
}
int main(void)
{
    test_forms_in_step();
    return tap_done();
}
