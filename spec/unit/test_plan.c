/* Unit tests of engine/plan: the model's defaults, the builders, the names of kinds and
 * errnos, the frozen flag set by validation. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "plan.h"
#include "plan_fixture.h"
#include "tap.h"
#include "util.h"

/* ------------------------------------------------------------------ builders */

static void test_defaults_and_builders(void)
{
    a3s_plan *p = a3s_plan_new();
    ok(p != NULL, "plan_new returns a plan");
    ok(p->network == A3S_NET_NONE, "default network none");
    ok(p->seccomp.socketpair_unix && p->seccomp.deny_clone_ns && p->seccomp.deny_tty_inject,
       "default seccomp booleans true");
    ok(p->seccomp.socket_errnum == EAFNOSUPPORT, "default socket errno EAFNOSUPPORT");
    ok(p->limits.timeout_ms == 120000 && p->limits.output_bytes == 102400 &&
           p->limits.nofile == 1024 && p->limits.core_bytes == 0 && p->limits.scan_depth == 64 &&
           p->limits.scan_entries == 1000000,
       "default limits");

    a3s_error e = {0};
    char buf[64];
    strcpy(buf, "/opt/tool");
    char file[32];
    strcpy(file, "policies/t.lua");
    /* Enough rules to grow every array several times. */
    int rc = 0;
    for (int i = 0; i < 40; i++)
        rc |= a3s_plan_add_fs(p, A3S_FS_RO, buf, i % 2 == 0, false, file, i + 1, &e);
    ok(rc == 0 && p->nfs == 40, "add_fs appends 40 rules");
    rc = 0;
    for (int i = 0; i < 20; i++) {
        rc |= a3s_plan_add_name(&p->env.keep, "NAME", file, i, &e);
        rc |= a3s_plan_env_set(p, "K", "V", NULL, 0, &e);
        rc |= a3s_plan_seccomp_deny(p, "bpf", EPERM, file, i, &e);
        rc |= a3s_plan_seccomp_allow_family(p, AF_INET, &e);
    }
    ok(rc == 0 && p->env.keep.n == 20 && p->env.nset == 20 && p->seccomp.ndeny == 20 &&
           p->seccomp.nsocket_allow == 20,
       "name/env/seccomp builders grow their arrays");
    /* Arguments are copied: changing the caller's buffers changes nothing. */
    strcpy(buf, "/XXXXXXXXX");
    strcpy(file, "changed.lua");
    ok_streq(p->fs[0].path, "/opt/tool", "add_fs copies the path");
    ok_streq(p->fs[39].prov.file, "policies/t.lua", "add_fs copies the provenance file");
    ok(p->fs[39].prov.line == 40 && p->fs[0].optional && !p->fs[1].optional,
       "line and optional flag stored");
    ok(p->env.set[3].prov.file == NULL, "NULL provenance file stays NULL (<engine>)");

    ok(a3s_plan_add_fs(p, A3S_FS_RO, NULL, false, false, NULL, 0, &e) == -1 &&
           e.code == A3S_ERR_INVALID,
       "add_fs refuses a NULL path");
    ok(a3s_plan_add_fs(p, A3S_FS_KIND_COUNT, "/x", false, false, NULL, 0, &e) == -1 &&
           e.code == A3S_ERR_INVALID,
       "add_fs refuses an unknown kind");

    ok(a3s_plan_set_roots(p, "/w", NULL, "/h", NULL, &e) == 0, "set_roots with NULLs");
    ok(p->workspace && strcmp(p->workspace, "/w") == 0 && !p->scratch && p->home &&
           strcmp(p->home, "/h") == 0 && !p->tmp,
       "set_roots stores copies, NULL means unset");
    ok(a3s_plan_set_roots(p, "/w", "/s", "/h", "/t", &e) == 0 && p->scratch && p->tmp,
       "set_roots replaces the previous roots");
    ok(a3s_plan_set_roots(p, "/w/", NULL, NULL, NULL, &e) == -1 && e.code == A3S_ERR_INVALID &&
           contains(e.msg, "/w/"),
       "set_roots refuses an unclean root: %s", e.msg);
    ok(p->workspace && strcmp(p->workspace, "/w") == 0,
       "a refused set_roots leaves the roots unchanged");
    a3s_plan_free(p);
    a3s_plan_free(NULL);
    ok(1, "plan_free(NULL) is harmless");
}

static void test_names(void)
{
    ok_streq(a3s_fs_kind_name(A3S_FS_HIDE), "hide", "kind name hide");
    ok_streq(a3s_fs_kind_name(A3S_FS_TMPFS), "tmpfs", "kind name tmpfs");
    ok_streq(a3s_fs_kind_name(A3S_FS_RO), "read_only", "kind name read_only");
    ok_streq(a3s_fs_kind_name(A3S_FS_RW), "writable", "kind name writable");
    ok_streq(a3s_fs_kind_name(A3S_FS_PROTECT), "protect", "kind name protect");
    ok_streq(a3s_fs_kind_name(A3S_FS_MASK), "mask", "kind name mask");

    static const struct {
        const char *n;
        int v;
    } t[] = {{"EPERM", EPERM},   {"ENOSYS", ENOSYS}, {"EACCES", EACCES},
             {"EAFNOSUPPORT", EAFNOSUPPORT},         {"EINVAL", EINVAL},
             {"EROFS", EROFS},   {"ENOENT", ENOENT}, {"EOPNOTSUPP", EOPNOTSUPP}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        ok(a3s_errno_from_name(t[i].n) == t[i].v, "errno_from_name(%s)", t[i].n);
        ok_streq(a3s_errno_name(t[i].v), t[i].n, "errno_name round trip");
    }
    ok(a3s_errno_from_name("ENOTSUP") == ENOTSUP, "ENOTSUP accepted");
    ok(a3s_errno_from_name("EBOGUS") == -1 && a3s_errno_from_name("eperm") == -1 &&
           a3s_errno_from_name(NULL) == -1,
       "unknown errno names give -1");
    ok(a3s_errno_name(0) == NULL && a3s_errno_name(EIO) == NULL, "no name for other errnos");
}

/* ------------------------------------------------------------------ frozen */

/* What was validated (and digested) is what is enforced: past validation every builder
 * refuses the plan and leaves it as it was. */
static void test_frozen(void)
{
    a3s_error e = {0};
    a3s_plan *p = base_plan(&HOST_A, "policies/baseline.lua", 0);
    ok(!p->frozen, "a plan being built is not frozen");
    p->limits.nofile = 1;
    ok(a3s_plan_validate(p, &e) == -1 && !p->frozen && !p->env.keep.frozen,
       "a refused plan is not frozen");
    p->limits.nofile = 1024;
    ok(a3s_plan_validate(p, &e) == 0 && p->frozen && p->env.strip_prefix.frozen &&
           p->protect_dirs.frozen,
       "a valid plan is frozen, its name lists too");
    ok(a3s_plan_validate(p, &e) == 0, "a frozen plan validates again");
    char d0[65], d1[65];
    must(a3s_plan_digest(p, d0, &e), &e);
    size_t nfs = p->nfs, nset = p->env.nset, ndeny = p->seccomp.ndeny,
           nfam = p->seccomp.nsocket_allow;

    a3s_name_list *lists[] = {&p->protect_dirs, &p->protect_files, &p->secret_prefixes,
                              &p->scan_skip,    &p->env.keep,      &p->env.keep_prefix,
                              &p->env.strip,    &p->env.strip_prefix};
    size_t nnames[8];
    for (size_t i = 0; i < 8; i++)
        nnames[i] = lists[i]->n;
    static const char frozen_msg[] = "plan: frozen after validation";
#define REFUSED(call, what)                                                                  \
    do {                                                                                     \
        a3s_error fe = {0};                                                                  \
        ok((call) == -1 && fe.code == A3S_ERR_INTERNAL && strcmp(fe.msg, frozen_msg) == 0,   \
           "frozen plan refuses %s: %s", what, fe.msg);                                      \
    } while (0)
    REFUSED(a3s_plan_add_fs(p, A3S_FS_PROTECT, "/home/alice/proj/.a3s", false, true, NULL, 0,
                            &fe),
            "add_fs");
    REFUSED(a3s_plan_set_roots(p, "/w", "/s", "/h", "/t", &fe), "set_roots");
    REFUSED(a3s_plan_env_set(p, "LD_PRELOAD", "/x.so", NULL, 0, &fe), "env_set");
    REFUSED(a3s_plan_seccomp_deny(p, "bpf", EPERM, NULL, 0, &fe), "seccomp_deny");
    REFUSED(a3s_plan_seccomp_allow_family(p, AF_INET, &fe), "seccomp_allow_family");
    for (size_t i = 0; i < 8; i++)
        REFUSED(a3s_plan_add_name(lists[i], "X", NULL, 0, &fe), "add_name");
#undef REFUSED
    bool same_names = true;
    for (size_t i = 0; i < 8; i++)
        same_names = same_names && lists[i]->n == nnames[i];
    ok(p->nfs == nfs && p->env.nset == nset && p->seccomp.ndeny == ndeny &&
           p->seccomp.nsocket_allow == nfam && same_names &&
           strcmp(p->workspace, "/home/alice/proj") == 0,
       "the refused builders changed nothing");
    must(a3s_plan_digest(p, d1, &e), &e);
    ok(strcmp(d0, d1) == 0, "digest unchanged after the refusals");
    a3s_plan_free(p);
}

int main(void)
{
    test_defaults_and_builders();
    test_names();
    test_frozen();
    return tap_done();
}
