/* Unit tests of engine/plan: strict validation (paths, roots, kinds, names, env,
 * seccomp, limits, network). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "plan.h"
#include "plan_fixture.h"
#include "tap.h"
#include "util.h"

/* ------------------------------------------------------------------ validation */

static a3s_plan *vplan(void)
{
    return base_plan(&HOST_A, "policies/x.lua", 0);
}

/* Validate p, expect A3S_ERR_POLICY with every needle (NULL-terminated) in the message;
 * frees p. */
static void expect_refused(a3s_plan *p, const char *what, ...)
{
    a3s_error e = {0};
    int rc = a3s_plan_validate(p, &e);
    bool all = true;
    va_list ap;
    va_start(ap, what);
    for (const char *n; (n = va_arg(ap, const char *));)
        if (!contains(e.msg, n)) {
            all = false;
            printf("#   message lacks '%s'\n", n);
        }
    va_end(ap);
    ok(rc == -1 && e.code == A3S_ERR_POLICY && all, "refused: %s -> %s", what, e.msg);
    a3s_plan_free(p);
}

static void expect_accepted(a3s_plan *p, const char *what)
{
    a3s_error e = {0};
    int rc = a3s_plan_validate(p, &e);
    ok(rc == 0, "accepted: %s%s%s", what, rc ? " -> " : "", rc ? e.msg : "");
    a3s_plan_free(p);
}

static a3s_plan *with_fs(enum a3s_fs_kind k, const char *path, const char *file, int line)
{
    a3s_plan *p = vplan();
    a3s_error e = {0};
    must(a3s_plan_add_fs(p, k, path, false, false, file, line, &e), &e);
    return p;
}

static void test_validate(void)
{
    a3s_error e = {0};
    expect_accepted(vplan(), "baseline-like plan (host A)");
    expect_accepted(base_plan(&HOST_B, "policies/y.lua", 100), "baseline-like plan (host B)");

    /* paths */
    expect_refused(with_fs(A3S_FS_RO, "etc/passwd", "bad.lua", 7), "relative path",
                   "etc/passwd", "bad.lua:7", "clean absolute", NULL);
    expect_refused(with_fs(A3S_FS_RO, "/usr/../etc", "bad.lua", 8), "'..' component",
                   "/usr/../etc", "bad.lua:8", NULL);
    expect_refused(with_fs(A3S_FS_RO, "/usr/./bin", "bad.lua", 9), "'.' component",
                   "/usr/./bin", "bad.lua:9", NULL);
    expect_refused(with_fs(A3S_FS_HIDE, "/usr/", "bad.lua", 10), "trailing slash", "/usr/",
                   "bad.lua:10", NULL);
    expect_refused(with_fs(A3S_FS_HIDE, "/usr//lib", "bad.lua", 11), "'//'", "/usr//lib", NULL);
    expect_refused(with_fs(A3S_FS_HIDE, "", "bad.lua", 12), "empty path", "bad.lua:12", NULL);
    expect_refused(with_fs(A3S_FS_MASK, "/a\nb", "bad.lua", 13), "newline in path", "newline",
                   "bad.lua:13", NULL);
    {
        a3s_plan *p = with_fs(A3S_FS_MASK, "/a\nb", "bad.lua", 13);
        a3s_error ne = {0};
        ok(a3s_plan_validate(p, &ne) == -1 && !strchr(ne.msg, '\n'),
           "the message itself stays on one line");
        a3s_plan_free(p);
    }

    /* writable roots */
    {
        a3s_plan *p = with_fs(A3S_FS_RW, "/etc", "policies/x.lua", 12);
        int rc = a3s_plan_validate(p, &e);
        ok(rc == -1 && e.code == A3S_ERR_POLICY, "RW outside the roots refused");
        ok_streq(e.msg,
                 "plan: writable root /etc (policies/x.lua:12) is outside the workspace and "
                 "the scratch dir; declare it with { broaden = true } if that is intended",
                 "RW outside: exact message");
        a3s_plan_free(p);
    }
    {
        /* The explicit broadening declaration allows it, and is part of the digest. */
        a3s_plan *p = with_fs(A3S_FS_RW, "/etc", "policies/x.lua", 12);
        a3s_plan *q = with_fs(A3S_FS_RW, "/etc", "policies/x.lua", 12);
        p->fs[p->nfs - 1].broaden = true;
        q->fs[q->nfs - 1].broaden = true;
        ok(a3s_plan_validate(p, &e) == 0, "RW outside with broaden accepted");
        char d1[65], d2[65];
        q->fs[q->nfs - 1].broaden = false;
        a3s_plan_digest(p, d1, &e);
        a3s_plan_digest(q, d2, &e);
        ok(strcmp(d1, d2) != 0, "broaden changes the digest");
        a3s_plan_free(p);
        a3s_plan_free(q);
    }
    expect_refused(with_fs(A3S_FS_RW, "/home/alice", "x.lua", 3), "RW on HOME (above the ws)",
                   "writable root /home/alice", "x.lua:3", NULL);
    expect_refused(with_fs(A3S_FS_RW, "/home/alice/projX", "x.lua", 4),
                   "RW on a sibling sharing the ws prefix", "/home/alice/projX", NULL);
    expect_refused(with_fs(A3S_FS_RW, "/", "x.lua", 5), "RW /", "writable root /", "x.lua:5",
                   "never", NULL);
    expect_accepted(with_fs(A3S_FS_RW, "/home/alice/proj/sub", "x.lua", 6), "RW under the ws");
    expect_accepted(with_fs(A3S_FS_RW, "/tmp/a3s-1234/cache", "x.lua", 6),
                    "RW under the scratch dir");
    {
        a3s_plan *p = vplan();
        must(a3s_plan_set_roots(p, NULL, NULL, "/home/alice", "/tmp", &e), &e);
        expect_refused(p, "RW with no workspace or scratch root set", "writable root",
                       "neither root is set", NULL);
    }
    {
        /* Only a scratch root: RW in the (unset) workspace has nothing to lie within. */
        a3s_plan *p = vplan();
        must(a3s_plan_set_roots(p, NULL, "/tmp/a3s-1234", "/home/alice", "/tmp", &e), &e);
        expect_refused(p, "RW workspace when only scratch is set", "/home/alice/proj", NULL);
    }

    /* root-replacing rules */
    expect_refused(with_fs(A3S_FS_HIDE, "/", "x.lua", 20), "HIDE /", "hidden path /",
                   "x.lua:20", NULL);
    expect_refused(with_fs(A3S_FS_MASK, "/", "x.lua", 21), "MASK /", "masked path /", NULL);
    expect_refused(with_fs(A3S_FS_TMPFS, "/", "x.lua", 22), "TMPFS /", "tmpfs /", NULL);
    expect_accepted(with_fs(A3S_FS_RO, "/", "x.lua", 23), "RO / (the root is read-only anyway)");

    /* protect */
    expect_refused(with_fs(A3S_FS_PROTECT, "/etc/hosts", "x.lua", 30),
                   "PROTECT outside the workspace", "protected path /etc/hosts", "x.lua:30",
                   NULL);
    expect_accepted(with_fs(A3S_FS_PROTECT, "/home/alice/proj/.vscode", "x.lua", 31),
                    "PROTECT inside the workspace");

    /* kind conflicts */
    {
        a3s_plan *p = vplan();
        must(a3s_plan_add_fs(p, A3S_FS_RO, "/opt", false, false, "a.lua", 3, &e), &e);
        must(a3s_plan_add_fs(p, A3S_FS_HIDE, "/opt", false, false, "b.lua", 9, &e), &e);
        expect_refused(p, "same path, two kinds", "conflicting", "/opt", "read_only", "a.lua:3",
                       "hide", "b.lua:9", NULL);
    }
    {
        a3s_plan *p = vplan();
        /* conflict with a declared rule of the base plan, engine provenance */
        must(a3s_plan_add_fs(p, A3S_FS_RO, "/etc/shadow", false, false, NULL, 0, &e), &e);
        expect_refused(p, "conflict with an engine rule", "/etc/shadow", "policies/x.lua:4",
                       "<engine>", NULL);
    }
    {
        a3s_plan *p = vplan();
        must(a3s_plan_add_fs(p, A3S_FS_MASK, "/home/alice/proj/.env", false, true, "<scan>", 0,
                             &e),
             &e);
        must(a3s_plan_add_fs(p, A3S_FS_PROTECT, "/home/alice/proj/.env", false, false, "p.lua",
                             2, &e),
             &e);
        expect_refused(p, "conflict between a discovered and a declared rule", "<scan>",
                       "p.lua:2", NULL);
    }
    {
        a3s_plan *p = vplan();
        must(a3s_plan_add_fs(p, A3S_FS_RO, "/opt", false, false, "a.lua", 3, &e), &e);
        must(a3s_plan_add_fs(p, A3S_FS_RO, "/opt", true, false, "b.lua", 4, &e), &e);
        size_t n = p->nfs;
        expect_accepted(p, "same path, same kind twice (harmless duplicate)");
        ok(n == 13, "duplicates are kept as declared");
    }

    /* names */
    {
        a3s_plan *p = vplan();
        free(p->name);
        p->name = strdup("bad name");
        expect_refused(p, "policy name with a space", "bad name", "[A-Za-z0-9_.-]+", NULL);
        p = vplan();
        free(p->name);
        p->name = strdup("");
        expect_refused(p, "empty policy name", "policy name", NULL);
        p = vplan();
        free(p->name);
        p->name = NULL;
        expect_refused(p, "missing policy name", "policy name", NULL);
        p = vplan();
        free(p->name);
        p->name = strdup("my-policy_2.v1");
        expect_accepted(p, "policy name with - _ .");
        p = vplan();
        free(p->name);
        p->name = malloc(200);
        memset(p->name, 'a', 199);
        p->name[199] = '\0';
        expect_refused(p, "policy name longer than 127", "longer than 127", NULL);
    }
    {
        static const char *bad[] = {"a/b", ".", "..", ""};
        for (size_t i = 0; i < 4; i++) {
            a3s_plan *p = vplan();
            add_name(&p->protect_dirs, bad[i], "n.lua", 5);
            expect_refused(p, "bad protect_dirs name", "protect_dirs", "n.lua:5", NULL);
        }
        a3s_plan *p = vplan();
        add_name(&p->protect_files, "x/y", "n.lua", 6);
        expect_refused(p, "bad protect_files name", "protect_files", "x/y", NULL);
        p = vplan();
        add_name(&p->secret_prefixes, "", "n.lua", 7);
        expect_refused(p, "empty secret prefix", "secret_prefixes", "n.lua:7", NULL);
        p = vplan();
        add_name(&p->scan_skip, "..", "n.lua", 8);
        expect_refused(p, "scan_skip ..", "scan_skip", NULL);
    }

    /* env */
    {
        a3s_plan *p = vplan();
        add_name(&p->env.keep, "1BAD", "env.lua", 3);
        expect_refused(p, "env keep name starting with a digit", "1BAD", "env.lua:3", NULL);
        p = vplan();
        add_name(&p->env.strip, "A-B", "env.lua", 4);
        expect_refused(p, "env strip name with '-'", "A-B", "env.lua:4", NULL);
        p = vplan();
        add_name(&p->env.keep_prefix, "", "env.lua", 5);
        expect_refused(p, "empty env keep prefix", "prefix", "env.lua:5", NULL);
        p = vplan();
        add_name(&p->env.strip_prefix, "X=", "env.lua", 6);
        expect_refused(p, "env strip prefix with '='", "X=", NULL);
        p = vplan();
        must(a3s_plan_env_set(p, "A B", "v", "env.lua", 7, &e), &e);
        expect_refused(p, "env set name with a space", "A B", "env.lua:7", NULL);
        p = vplan();
        must(a3s_plan_env_set(p, "FOO", "1", "env.lua", 8, &e), &e);
        add_name(&p->env.strip, "foo", "env.lua", 9);
        expect_refused(p, "env name both set and stripped (case-insensitive)", "FOO",
                       "env.lua:8", "env.lua:9", NULL);
        p = vplan();
        add_name(&p->env.strip_prefix, "HOM", "env.lua", 10);
        expect_accepted(p, "set name under a strip prefix (re-homing) is fine");
    }

    /* seccomp */
    {
        a3s_plan *p = vplan();
        must(a3s_plan_seccomp_deny(p, "Open", EPERM, "sc.lua", 1, &e), &e);
        expect_refused(p, "upper-case syscall name", "Open", "sc.lua:1", NULL);
        p = vplan();
        must(a3s_plan_seccomp_deny(p, "", EPERM, "sc.lua", 2, &e), &e);
        expect_refused(p, "empty syscall name", "sc.lua:2", NULL);
        p = vplan();
        must(a3s_plan_seccomp_deny(p, "bpf", 0, "sc.lua", 3, &e), &e);
        expect_refused(p, "errno 0", "bpf", "errno 0", "sc.lua:3", NULL);
        p = vplan();
        must(a3s_plan_seccomp_deny(p, "bpf", 4096, "sc.lua", 4, &e), &e);
        expect_refused(p, "errno 4096", "4096", NULL);
        p = vplan();
        must(a3s_plan_seccomp_deny(p, "link", EACCES, "sc.lua", 5, &e), &e);
        expect_refused(p, "one syscall denied with two errnos", "link", "policies/x.lua:42",
                       "sc.lua:5", NULL);
        p = vplan();
        must(a3s_plan_seccomp_deny(p, "link", EPERM, "sc.lua", 6, &e), &e);
        expect_accepted(p, "same syscall, same errno twice");
        p = vplan();
        must(a3s_plan_seccomp_allow_family(p, 0, &e), &e);
        expect_refused(p, "socket family 0", "family 0", "policies/x.lua:43", NULL);
        p = vplan();
        must(a3s_plan_seccomp_allow_family(p, 46, &e), &e);
        expect_refused(p, "socket family 46", "family 46", NULL);
        p = vplan();
        must(a3s_plan_seccomp_allow_family(p, AF_INET6, &e), &e);
        expect_accepted(p, "socket family AF_INET6");
        p = vplan();
        p->seccomp.socket_errnum = 0;
        expect_refused(p, "socket errno 0", "socket errno 0", NULL);
    }

    /* limits */
    {
        static const struct {
            size_t off;
            int64_t v;
            const char *needle;
        } bad[] = {
            {offsetof(a3s_limits, timeout_ms), 0, "timeout_ms = 0"},
            {offsetof(a3s_limits, timeout_ms), 86400001, "timeout_ms = 86400001"},
            {offsetof(a3s_limits, output_bytes), -5, "output_bytes = -5"},
            {offsetof(a3s_limits, output_bytes), ((int64_t)1 << 30) + 1, "output_bytes"},
            {offsetof(a3s_limits, nofile), 15, "nofile = 15"},
            {offsetof(a3s_limits, nofile), 1048577, "nofile = 1048577"},
            {offsetof(a3s_limits, core_bytes), -1,
             "core_bytes = -1 (policies/x.lua:44) must be >= 0"},
            {offsetof(a3s_limits, scan_depth), 0, "scan_depth = 0"},
            {offsetof(a3s_limits, scan_depth), 4097, "scan_depth = 4097"},
            {offsetof(a3s_limits, scan_entries), 0, "scan_entries = 0"},
            {offsetof(a3s_limits, scan_entries), 100000001, "scan_entries = 100000001"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            a3s_plan *p = vplan();
            *(int64_t *)((char *)&p->limits + bad[i].off) = bad[i].v;
            expect_refused(p, bad[i].needle, bad[i].needle, "policies/x.lua:44", NULL);
        }
        a3s_plan *p = vplan();
        p->limits.timeout_ms = 1;
        p->limits.output_bytes = (int64_t)1 << 30;
        p->limits.nofile = 16;
        p->limits.core_bytes = 1 << 20;
        p->limits.scan_depth = 4096;
        p->limits.scan_entries = 100000000;
        expect_accepted(p, "limits at the edges of their ranges");
    }

    /* network, roots */
    {
        a3s_plan *p = vplan();
        p->network = 1;
        expect_refused(p, "unknown network mode", "network mode 1", NULL);
        p = vplan();
        free(p->home);
        p->home = strdup("home/alice");
        expect_refused(p, "unclean root set directly", "home root", NULL);
    }
    ok(a3s_plan_validate(NULL, &e) == -1, "validate(NULL) fails");
}
int main(void)
{
    test_validate();
    return tap_done();
}
