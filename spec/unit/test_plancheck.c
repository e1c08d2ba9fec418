/* Unit tests for backends/linux/plancheck.c (backend.h plan_check) and the bwrap builder's
 * redundant-rule fast path: what a run refuses of a plan is refused before the run, naming
 * the rule and its provenance, and a skipped rule's required path is still required. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bwrap.h"
#include "linux_backend.h"
#include "plan.h"
#include "tap.h"

static char ws[] = "/tmp/a3s-plancheck-XXXXXX";
static int ws_fd = -1;

static a3s_backend_host host(void)
{
    return (a3s_backend_host){.workspace = ws, .ws_fd = ws_fd, .tmp = "/tmp"};
}

static a3s_plan *plan_with_roots(void)
{
    a3s_error err;
    a3s_plan *p = a3s_plan_new();
    if (!p || !(p->name = strdup("x")) ||
        a3s_plan_set_roots(p, ws, "/tmp/a3s-sandbox-XXXXXX", "/nonexistent", "/tmp", &err) < 0)
        abort();
    return p;
}

static void add_fs(a3s_plan *p, enum a3s_fs_kind k, const char *path, bool optional, int line)
{
    a3s_error err;
    if (a3s_plan_add_fs(p, k, path, optional, false, "policies/x.lua", line, &err) < 0)
        abort();
}

static void test_syscalls(void)
{
    a3s_backend_host h = host();
    a3s_error err;
    a3s_plan *p = plan_with_roots();
    if (a3s_plan_seccomp_deny(p, "keyctl", EPERM, "policies/x.lua", 3, &err) < 0 ||
        a3s_plan_seccomp_deny(p, "arm_fadvise64_64", EPERM, "policies/x.lua", 4, &err) < 0)
        abort();
    ok(a3s_linux_plan_check(&h, p, false, &err) == 0,
       "known syscalls (one absent on this architecture) pass");
    if (a3s_plan_seccomp_deny(p, "ptrce", EPERM, "policies/x.lua", 5, &err) < 0)
        abort();
    memset(&err, 0, sizeof err);
    ok(a3s_linux_plan_check(&h, p, false, &err) < 0 && err.code == A3S_ERR_POLICY,
       "an unknown syscall is refused without the host (A3S_ERR_POLICY)");
    ok(strstr(err.msg, "'ptrce'") && strstr(err.msg, "policies/x.lua:5"),
       "the message names the syscall and its policy line (%s)", err.msg);
    memset(&err, 0, sizeof err);
    ok(a3s_linux_plan_check(&h, p, true, &err) < 0 && strstr(err.msg, "ptrce"),
       "and with the host");
    a3s_plan_free(p);
}

static void test_paths(void)
{
    a3s_backend_host h = host();
    a3s_error err;
    char inside_missing[128], inside_present[128];
    snprintf(inside_missing, sizeof inside_missing, "%s/no-such-dir", ws);
    snprintf(inside_present, sizeof inside_present, "%s/present", ws);
    if (mkdirat(ws_fd, "present", 0700) < 0)
        abort();

    a3s_plan *p = plan_with_roots();
    add_fs(p, A3S_FS_RW, ws, false, 1);
    add_fs(p, A3S_FS_RW, "/tmp/a3s-sandbox-XXXXXX", false, 2); /* made by the run */
    add_fs(p, A3S_FS_RO, "/usr", false, 3);
    add_fs(p, A3S_FS_RO, "/nonexistent-a3s-plancheck/opt", true, 4);
    add_fs(p, A3S_FS_MASK, "/nonexistent-a3s-plancheck/secret", false, 5);
    add_fs(p, A3S_FS_RO, inside_present, false, 6);
    add_fs(p, A3S_FS_RO, inside_missing, true, 7);
    memset(&err, 0, sizeof err);
    ok(a3s_linux_plan_check(&h, p, true, &err) == 0,
       "present, optional, masked and scratch paths pass (%s)", err.msg);
    a3s_plan_free(p);

    p = plan_with_roots();
    add_fs(p, A3S_FS_RO, "/nonexistent-a3s-plancheck/sdk", false, 9);
    ok(a3s_linux_plan_check(&h, p, false, &err) == 0,
       "a missing path is not checked without the host");
    memset(&err, 0, sizeof err);
    ok(a3s_linux_plan_check(&h, p, true, &err) < 0 && err.code == A3S_ERR_POLICY,
       "a missing non-optional path is refused for this host");
    ok(strstr(err.msg, "/nonexistent-a3s-plancheck/sdk") && strstr(err.msg, "policies/x.lua:9"),
       "the message names the path and its policy line (%s)", err.msg);
    a3s_plan_free(p);

    p = plan_with_roots();
    add_fs(p, A3S_FS_PROTECT, inside_missing, false, 11);
    memset(&err, 0, sizeof err);
    ok(a3s_linux_plan_check(&h, p, true, &err) < 0 && strstr(err.msg, "policies/x.lua:11"),
       "a missing non-optional path inside the workspace is refused (%s)", err.msg);
    a3s_plan_free(p);
    unlinkat(ws_fd, "present", AT_REMOVEDIR);
}

/* The builder skips a read-only rule under the read-only host root (the same view), but
 * a missing required path still refuses the run. */
static void test_bwrap_skip(void)
{
    static char *const argv[] = {"true", NULL};
    a3s_bwrap_cmd cmd = {.argv = argv, .shell = "/bin/bash", .launcher = "/bin/true"};
    a3s_strv env = {0}, out = {0}, host = {0}, cmd_out = {0}, setup = {0};
    a3s_error err;
    a3s_plan *p = plan_with_roots();
    add_fs(p, A3S_FS_RO, "/nonexistent-a3s-plancheck/opt", true, 4);
    if (a3s_plan_validate(p, &err) < 0) {
        printf("# %s\n", err.msg);
        abort();
    }
    int rc = a3s_bwrap_build_args(p, &env, &cmd, &out, &host, &cmd_out, &setup, &err);
    ok(rc == 0, "an optional missing read-only path is skipped (%s)", rc ? err.msg : "ok");
    a3s_strv_free(&out);
    a3s_strv_free(&host);
    a3s_strv_free(&cmd_out);
    a3s_strv_free(&setup);
    a3s_plan_free(p);

    p = plan_with_roots();
    add_fs(p, A3S_FS_RO, "/nonexistent-a3s-plancheck/sdk", false, 9);
    if (a3s_plan_validate(p, &err) < 0) {
        printf("# %s\n", err.msg);
        abort();
    }
    memset(&err, 0, sizeof err);
    rc = a3s_bwrap_build_args(p, &env, &cmd, &out, &host, &cmd_out, &setup, &err);
    ok(rc < 0 && strstr(err.msg, "/nonexistent-a3s-plancheck/sdk") &&
           strstr(err.msg, "policies/x.lua:9"),
       "a missing required read-only path under the read-only root fails (%s)", err.msg);
    a3s_strv_free(&out);
    a3s_strv_free(&host);
    a3s_strv_free(&cmd_out);
    a3s_strv_free(&setup);
    a3s_plan_free(p);
}

int main(void)
{
    if (!mkdtemp(ws) || (ws_fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        perror("workspace");
        return 1;
    }
    test_syscalls();
    test_paths();
    test_bwrap_skip();
    close(ws_fd);
    rmdir(ws);
    return tap_done();
}
