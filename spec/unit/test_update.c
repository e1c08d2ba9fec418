/* Unit tests of engine/update.c: every broadening is caught, with its reason, whether or
 * not its rule is labelled discovered; every narrowing passes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "plan.h"
#include "tap.h"
#include "update.h"

/* The base plan; `mut` applies one change on top of it. */
typedef void (*mutation)(a3s_plan *p);

static a3s_plan *base(mutation mut)
{
    a3s_error e;
    a3s_plan *p = a3s_plan_new();
    a3s_plan_set_roots(p, "/ws", "/tmp/s", "/home/u", "/tmp", &e);
    a3s_plan_add_fs(p, A3S_FS_RW, "/ws", false, false, "b.lua", 1, &e);
    a3s_plan_add_fs(p, A3S_FS_RW, "/tmp/s", false, false, "b.lua", 2, &e);
    a3s_plan_add_fs(p, A3S_FS_HIDE, "/home/u", true, false, "b.lua", 3, &e);
    a3s_plan_add_fs(p, A3S_FS_TMPFS, "/tmp", false, false, "b.lua", 4, &e);
    a3s_plan_add_fs(p, A3S_FS_MASK, "/etc/shadow", true, false, "b.lua", 5, &e);
    a3s_plan_add_fs(p, A3S_FS_RO, "/home/u/.pyenv", true, true, "b.lua", 6, &e);
    a3s_plan_add_name(&p->protect_dirs, ".git", "b.lua", 7, &e);
    a3s_plan_add_name(&p->protect_files, ".bashrc", "b.lua", 7, &e);
    a3s_plan_add_name(&p->secret_prefixes, ".env", "b.lua", 8, &e);
    a3s_plan_add_name(&p->scan_skip, "node_modules", "b.lua", 9, &e);
    a3s_plan_add_name(&p->env.keep, "PATH", "b.lua", 10, &e);
    a3s_plan_add_name(&p->env.keep_prefix, "LC_", "b.lua", 10, &e);
    a3s_plan_add_name(&p->env.strip, "BASH_ENV", "b.lua", 11, &e);
    a3s_plan_add_name(&p->env.strip_prefix, "LD_", "b.lua", 11, &e);
    a3s_plan_env_set(p, "HOME", "/tmp/s", "b.lua", 12, &e);
    a3s_plan_seccomp_deny(p, "keyctl", EPERM, "b.lua", 13, &e);
    a3s_plan_seccomp_deny(p, "unshare", EPERM, "b.lua", 13, &e);
    if (mut)
        mut(p);
    return p;
}

/* Empty a list the way the plan owns it (the test removes declarations). */
static void drop_names(a3s_name_list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].name);
        free(l->v[i].prov.file);
    }
    l->n = 0;
}

static void m_add_rw(a3s_plan *p) { a3s_plan_add_fs(p, A3S_FS_RW, "/elsewhere", false, false, "d.lua", 1, NULL); }
static void n_rw_inside(a3s_plan *p) { a3s_plan_add_fs(p, A3S_FS_RW, "/ws/.a3s/loops", true, false, "d.lua", 1, NULL); }
static void m_add_ro(a3s_plan *p) { a3s_plan_add_fs(p, A3S_FS_RO, "/home/u/.cache", true, false, "d.lua", 1, NULL); }
static void m_drop_hide(a3s_plan *p) { free(p->fs[2].path); p->fs[2].path = strdup("/home/other"); }
static void m_drop_mask(a3s_plan *p) { free(p->fs[4].path); p->fs[4].path = strdup("/etc/other"); }
static void m_drop_tmpfs(a3s_plan *p) { p->fs[3].kind = A3S_FS_HIDE; }
static void m_drop_protect_name(a3s_plan *p) { drop_names(&p->protect_dirs); }
static void m_drop_secret(a3s_plan *p) { drop_names(&p->secret_prefixes); }
static void m_add_skip(a3s_plan *p) { a3s_plan_add_name(&p->scan_skip, "vendor", "d.lua", 1, NULL); }
static void m_add_keep(a3s_plan *p) { a3s_plan_add_name(&p->env.keep, "AWS_SECRET_ACCESS_KEY", "d.lua", 1, NULL); }
static void m_add_keep_prefix(a3s_plan *p) { a3s_plan_add_name(&p->env.keep_prefix, "AWS_", "d.lua", 1, NULL); }
static void m_drop_strip(a3s_plan *p) { drop_names(&p->env.strip); }
static void m_drop_strip_prefix(a3s_plan *p) { drop_names(&p->env.strip_prefix); }
static void m_change_set(a3s_plan *p) { free(p->env.set[0].value); p->env.set[0].value = strdup("/elsewhere"); }
static void m_add_set(a3s_plan *p) { a3s_plan_env_set(p, "LD_PRELOAD", "/x.so", "d.lua", 1, NULL); }
static void m_drop_deny(a3s_plan *p)
{
    free(p->seccomp.deny[1].syscall);
    free(p->seccomp.deny[1].prov.file);
    p->seccomp.ndeny = 1;
}
static void m_add_family(a3s_plan *p) { a3s_plan_seccomp_allow_family(p, AF_INET, NULL); }
static void m_clone_ns(a3s_plan *p) { p->seccomp.deny_clone_ns = false; }
static void m_tty(a3s_plan *p) { p->seccomp.deny_tty_inject = false; }
static void m_socketpair(a3s_plan *p) { p->seccomp.socketpair_unix = true; }
static void m_timeout_up(a3s_plan *p) { p->limits.timeout_ms *= 2; }
static void m_output_up(a3s_plan *p) { p->limits.output_bytes *= 2; }
static void m_nofile_up(a3s_plan *p) { p->limits.nofile *= 2; }
static void m_core_up(a3s_plan *p) { p->limits.core_bytes = 1 << 20; }

static void n_drop_rw(a3s_plan *p) { p->fs[0].kind = A3S_FS_RO; p->fs[0].discovered = false; /* review: ws read-only */ }
static void n_add_mask(a3s_plan *p) { a3s_plan_add_fs(p, A3S_FS_MASK, "/etc/hosts", true, false, "d.lua", 1, NULL); }
static void n_add_protect(a3s_plan *p) { a3s_plan_add_name(&p->protect_dirs, "ci", "d.lua", 1, NULL); }
static void n_add_strip(a3s_plan *p) { a3s_plan_add_name(&p->env.strip, "NODE_OPTIONS", "d.lua", 1, NULL); }
static void n_add_deny(a3s_plan *p) { a3s_plan_seccomp_deny(p, "ptrace", EPERM, "d.lua", 1, NULL); }
static void n_limits_down(a3s_plan *p) { p->limits.timeout_ms = 1000; p->limits.output_bytes = 4096; }
static void n_scan_limits(a3s_plan *p) { p->limits.scan_depth = 8; p->limits.scan_entries = 10; }
/* `discovered` is a label: a discovered widening is a widening all the same. */
static void m_add_ro_discovered(a3s_plan *p) { a3s_plan_add_fs(p, A3S_FS_RO, "/opt/tool", true, true, NULL, 0, NULL); }
static void m_add_rw_discovered(a3s_plan *p) { a3s_plan_add_fs(p, A3S_FS_RW, "/opt", false, true, NULL, 0, NULL); p->fs[p->nfs - 1].broaden = true; }
static void m_hide_to_ro_discovered(a3s_plan *p) { p->fs[2].kind = A3S_FS_RO; p->fs[2].discovered = true; }
static void m_add_set_discovered(a3s_plan *p) { a3s_plan_env_set(p, "LD_PRELOAD", "/x.so", "d.lua", 1, NULL); p->env.set[p->env.nset - 1].discovered = true; }
static void n_undiscovered(a3s_plan *p) { p->fs[5].discovered = false; }
static void n_errno(a3s_plan *p) { p->seccomp.deny[0].errnum = ENOSYS; }
static void n_prov(a3s_plan *p) { p->fs[0].prov.line = 99; }

int main(void)
{
    const struct {
        mutation m;
        const char *why;
    } broad[] = {
        {m_add_rw, "adds writable root /elsewhere"},
        {m_add_ro, "adds read-only exposure /home/u/.cache"},
        {m_drop_hide, "removes hide rule /home/u"},
        {m_drop_mask, "removes mask rule /etc/shadow"},
        {m_drop_tmpfs, "removes tmpfs rule /tmp"},
        {m_drop_protect_name, "removes protected directory '.git'"},
        {m_drop_secret, "removes secret prefix '.env'"},
        {m_add_skip, "adds scan skip 'vendor'"},
        {m_add_keep, "adds env keep 'AWS_SECRET_ACCESS_KEY'"},
        {m_add_keep_prefix, "adds env keep prefix 'AWS_'"},
        {m_drop_strip, "removes env strip 'BASH_ENV'"},
        {m_drop_strip_prefix, "removes env strip prefix 'LD_'"},
        {m_change_set, "sets env HOME to a new value"},
        {m_add_set, "sets env LD_PRELOAD to a new value"},
        {m_drop_deny, "no longer denies syscall unshare"},
        {m_add_family, "allows socket family 2"},
        {m_clone_ns, "allows clone with namespace flags"},
        {m_tty, "allows TIOCSTI/TIOCLINUX"},
        {m_socketpair, "allows socketpair(AF_UNIX)"},
        {m_timeout_up, "raises limit timeout_ms from 120000 to 240000"},
        {m_output_up, "raises limit output_bytes"},
        {m_nofile_up, "raises limit nofile"},
        {m_core_up, "raises limit core_bytes"},
        {m_add_ro_discovered, "adds read-only exposure /opt/tool"},
        {m_add_rw_discovered, "adds writable root /opt"},
        {m_hide_to_ro_discovered, "adds read-only exposure /home/u"},
        {m_add_set_discovered, "sets env LD_PRELOAD to a new value"},
    };
    /* The base has socketpair_unix true by default: start that case from false. */
    for (size_t i = 0; i < sizeof broad / sizeof broad[0]; i++) {
        a3s_plan *cur = base(NULL), *next = base(broad[i].m);
        if (broad[i].m == m_socketpair)
            cur->seccomp.socketpair_unix = false;
        char why[256];
        bool b = a3s_plan_broadens(cur, next, why, sizeof why);
        ok(b && strstr(why, broad[i].why), "broadening caught: %s (got '%s')", broad[i].why,
           b ? why : "not broader");
        a3s_plan_free(cur);
        a3s_plan_free(next);
    }

    const struct {
        mutation m;
        const char *what;
    } narrow[] = {
        {NULL, "identical plans"},
        {n_drop_rw, "workspace made read-only (review policy)"},
        {n_add_mask, "an extra mask"},
        {n_rw_inside, "a writable path inside the writable workspace"},
        {n_add_protect, "an extra protected name"},
        {n_add_strip, "an extra env strip"},
        {n_add_deny, "an extra syscall denial"},
        {n_limits_down, "lower deadline and output budget"},
        {n_scan_limits, "scan limits changed"},
        {n_undiscovered, "the same rule, no longer labelled discovered"},
        {n_errno, "a different errno for a denial"},
        {n_prov, "only provenance moved"},
    };
    for (size_t i = 0; i < sizeof narrow / sizeof narrow[0]; i++) {
        a3s_plan *cur = base(NULL), *next = base(narrow[i].m);
        char why[256];
        bool b = a3s_plan_broadens(cur, next, why, sizeof why);
        ok(!b, "not broader: %s%s%s", narrow[i].what, b ? " -- got: " : "", b ? why : "");
        a3s_plan_free(cur);
        a3s_plan_free(next);
    }

    /* Dropping a protective rule broadens, discovered or not. */
    {
        a3s_plan *cur = base(NULL), *next = base(NULL);
        a3s_plan_add_fs(cur, A3S_FS_MASK, "/etc/gshadow", true, true, NULL, 0, NULL);
        a3s_plan_env_set(next, "GOPROXY", "off", "d.lua", 1, NULL);
        a3s_plan_env_set(cur, "GOPROXY", "off", "d.lua", 1, NULL);
        cur->env.set[cur->env.nset - 1].discovered = true;
        char why[256];
        bool b = a3s_plan_broadens(cur, next, why, sizeof why);
        ok(b && strstr(why, "removes mask rule /etc/gshadow"),
           "dropping a discovered mask broadens (got '%s')", b ? why : "not broader");
        a3s_plan_free(next);
        next = base(NULL);
        a3s_plan_add_fs(next, A3S_FS_MASK, "/etc/gshadow", true, false, NULL, 0, NULL);
        b = a3s_plan_broadens(cur, next, why, sizeof why);
        ok(b && strstr(why, "no longer sets env GOPROXY"),
           "dropping a discovered env value broadens (got '%s')", b ? why : "not broader");
        a3s_plan_free(cur);
        a3s_plan_free(next);
    }

    /* Narrowing then re-broadening: each direction judged on its own. */
    a3s_plan *wide = base(NULL), *tight = base(n_limits_down);
    char why[256];
    ok(!a3s_plan_broadens(wide, tight, why, sizeof why), "narrowing accepted");
    ok(a3s_plan_broadens(tight, wide, why, sizeof why), "re-broadening refused: %s", why);
    a3s_plan_free(wide);
    a3s_plan_free(tight);
    return tap_done();
}
