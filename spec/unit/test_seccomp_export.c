/* Unit tests for backends/linux/seccomp.c: the exported program (a sealed memfd bwrap
 * loads) and the JSON description of a plan's filter (spec/unit/seccomp_fixture.h). */
#include "seccomp_fixture.h"

static void test_export(void)
{
    a3s_seccomp_plan p = baseline_plan();
    a3s_error err;
    memset(&err, 0, sizeof err);
    int fd = a3s_seccomp_export(&p, &err);
    ok(fd >= 0, "export returns an fd (%s)", fd < 0 ? err.msg : "ok");
    if (fd < 0)
        return;

    ok(lseek(fd, 0, SEEK_CUR) == 0, "exported fd is at offset 0");
    struct stat st;
    ok(fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size % (off_t)sizeof(struct sock_filter) == 0,
       "exported size is a positive multiple of %zu (%lld)", sizeof(struct sock_filter),
       (long long)st.st_size);
    int seals = fcntl(fd, F_GET_SEALS);
    ok(seals == (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL),
       "memfd fully sealed (0x%x)", seals);
    errno = 0;
    ok(write(fd, "x", 1) < 0 && errno == EPERM, "write to the sealed memfd fails with EPERM");
    ok(ftruncate(fd, 0) < 0, "truncating the sealed memfd fails");
    int fdfl = fcntl(fd, F_GETFD);
    ok(fdfl >= 0 && (fdfl & FD_CLOEXEC), "exported fd is CLOEXEC");

    /* load the exported program the way bwrap does, and check it is the real filter */
    size_t len = (size_t)st.st_size;
    struct sock_filter *prog = malloc(len);
    ok(prog && pread(fd, prog, len, 0) == (ssize_t)len, "read the exported program back");
    if (prog) {
        struct sock_fprog fp = {(unsigned short)(len / sizeof *prog), prog};
        call tests[] = {mk(SYS_keyctl, KEYCTL_GET_KEYRING_ID, 0x7ffffff0UL, 0, 0),
                        c_socket(AF_INET), mk(SYS_getpid, 0, 0, 0, 0)};
        int want[] = {EPERM, EAFNOSUPPORT, 0};
        for (size_t i = 0; i < 3; i++) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                child_quiet();
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp, 0, 0) < 0)
                    _exit(EXIT_LOAD_FAILED);
                _exit(child_make_call(&tests[i]));
            }
            int stt = 0;
            int r = pid > 0 && waitpid(pid, &stt, 0) == pid ? decode(stt) : -1;
            ok(r == want[i], "exported BPF loaded raw: call %zu -> %d (got %d)", i, want[i], r);
        }
        free(prog);
    }
    close(fd);

    /* failures: A3S_ERR_SETUP naming the rule, and no fd left behind */
    int before = count_fds();
    a3s_sc_rule bad[] = {
        {.syscall = "keyctl", .errnum = EPERM},
        {.syscall = "nosuchsyscall", .errnum = EPERM, .prov = {"policies/x.lua", 7}}};
    p.deny = bad;
    p.ndeny = 2;
    memset(&err, 0, sizeof err);
    ok(a3s_seccomp_export(&p, &err) == -1 && err.code == A3S_ERR_SETUP,
       "unknown syscall: export fails with A3S_ERR_SETUP");
    ok(strstr(err.msg, "nosuchsyscall") != NULL, "error names the syscall: %s", err.msg);
    ok(strstr(err.msg, "policies/x.lua:7") != NULL, "error names the provenance: %s", err.msg);
    memset(&err, 0, sizeof err);
    ok(a3s_seccomp_load(&p, &err) == -1 && err.code == A3S_ERR_SETUP,
       "unknown syscall: load fails too");

    a3s_sc_rule conflict[] = {{.syscall = "keyctl", .errnum = EPERM},
                              {.syscall = "keyctl", .errnum = ENOSYS}};
    p.deny = conflict;
    memset(&err, 0, sizeof err);
    ok(a3s_seccomp_export(&p, &err) == -1 && strstr(err.msg, "keyctl"),
       "conflicting errnos refused: %s", err.msg);

    a3s_sc_rule zero[] = {{.syscall = "keyctl", .errnum = 0}};
    p.deny = zero;
    p.ndeny = 1;
    memset(&err, 0, sizeof err);
    ok(a3s_seccomp_export(&p, &err) == -1 && err.code == A3S_ERR_SETUP, "errno 0 refused: %s",
       err.msg);

    p = baseline_plan();
    p.socket_errnum = 0;
    memset(&err, 0, sizeof err);
    ok(a3s_seccomp_export(&p, &err) == -1 && strstr(err.msg, "socket"),
       "socket_errnum 0 refused: %s", err.msg);

    p = baseline_plan();
    int huge[] = {AF_INET, 300};
    p.socket_allow = huge;
    p.nsocket_allow = 2;
    memset(&err, 0, sizeof err);
    ok(a3s_seccomp_export(&p, &err) == -1 && err.code == A3S_ERR_SETUP,
       "family out of range refused: %s", err.msg);
    ok(count_fds() == before, "no fd leaked on the failure paths (%d vs %d)", count_fds(), before);

    ok(a3s_seccomp_syscall_known("keyctl"), "keyctl is known");
    ok(a3s_seccomp_syscall_known("arm_fadvise64_64"), "arm_fadvise64_64 is known (absent here)");
    ok(!a3s_seccomp_syscall_known("nosuchsyscall"), "nosuchsyscall is unknown");
    ok(!a3s_seccomp_syscall_known(""), "empty name is unknown");
    ok(!a3s_seccomp_syscall_known(NULL), "NULL name is unknown");
}

/* Find the first array element whose string member `key` equals `val`. */
static json_t *find(json_t *arr, const char *key, const char *val)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        const char *s = json_string_value(json_object_get(o, key));
        if (s && strcmp(s, val) == 0)
            return o;
    }
    return NULL;
}

static const char *sval(json_t *j)
{
    const char *s = json_string_value(j);
    return s ? s : "";
}

static const char *str(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(missing)";
}

static void test_describe(void)
{
    a3s_seccomp_plan p = baseline_plan();
    char *text = a3s_seccomp_describe_json(&p);
    ok(text != NULL, "describe_json returns text");
    json_error_t je;
    json_t *arr = text ? json_loads(text, 0, &je) : NULL;
    ok(arr && json_is_array(arr), "describe_json parses as a JSON array");
    if (!arr) {
        free(text);
        return;
    }

    json_t *o = find(arr, "syscall", "keyctl");
    ok(o && !strcmp(str(o, "action"), "errno") && !strcmp(str(o, "errno"), "EPERM"),
       "keyctl: errno EPERM");
    size_t i, nkeyctl = 0;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const char *s = json_string_value(json_object_get(e, "syscall"));
        nkeyctl += s && !strcmp(s, "keyctl");
    }
    ok(nkeyctl == 1, "the duplicate keyctl rule is described once (%zu)", nkeyctl);
    o = find(arr, "syscall", "unshare");
    ok(o && !strcmp(str(o, "errno"), "EPERM"), "unshare: EPERM");
    o = find(arr, "syscall", "arm_fadvise64_64");
    ok(o && json_object_get(o, "skipped"), "absent syscall marked skipped");
    o = find(arr, "syscall", "socket");
    ok(o && !strcmp(str(o, "errno"), "EAFNOSUPPORT") && !strcmp(str(o, "when"), "any family"),
       "socket: EAFNOSUPPORT, any family");
    o = find(arr, "syscall", "socketpair");
    ok(o && strstr(str(o, "when"), "family not in allow list") &&
           strstr(str(o, "when"), "SOCK_STREAM/SOCK_SEQPACKET") &&
           !strcmp(sval(json_array_get(json_object_get(o, "allow"), 0)), "AF_UNIX"),
       "socketpair: allowed for AF_UNIX stream and seqpacket pairs only");
    o = find(arr, "syscall", "clone");
    ok(o && !strcmp(str(o, "errno"), "EPERM") && !strcmp(str(o, "when"), "namespace flags"),
       "clone: namespace flags");
    o = find(arr, "syscall", "clone3");
    ok(o && !strcmp(str(o, "errno"), "ENOSYS") && !json_object_get(o, "when"),
       "clone3: ENOSYS always");
    o = find(arr, "syscall", "ioctl");
    ok(o && !strcmp(str(o, "when"), "TIOCSTI|TIOCLINUX") && !strcmp(str(o, "errno"), "EPERM"),
       "ioctl: TIOCSTI|TIOCLINUX");
    o = find(arr, "syscall", "fchmodat");
    ok(o && !strcmp(str(o, "errno"), "EPERM") && json_is_true(json_object_get(o, "fixed")) &&
           !strcmp(str(o, "when"), "mode has S_ISUID|S_ISGID"),
       "fchmodat: fixed, EPERM when the mode has S_ISUID|S_ISGID");
    o = find(arr, "syscall", "openat");
    ok(o && !strcmp(str(o, "errno"), "EPERM") &&
           !strcmp(str(o, "when"), "O_CREAT|O_TMPFILE and mode has S_ISUID|S_ISGID"),
       "openat: EPERM with O_CREAT|O_TMPFILE and a set-id mode");
    o = find(arr, "syscall", "fchmodat2");
    ok(o && (!strcmp(str(o, "errno"), "EPERM") ||
             (!strcmp(str(o, "errno"), "ENOSYS") && !json_object_get(o, "when"))),
       "fchmodat2: EPERM on a set-id mode, or ENOSYS always (unknown to libseccomp)");
    o = find(arr, "syscall", "openat2");
    ok(o && !strcmp(str(o, "errno"), "ENOSYS") && json_is_true(json_object_get(o, "fixed")) &&
           !json_object_get(o, "when"),
       "openat2: fixed, ENOSYS always");
    o = find(arr, "syscall", "keyctl");
    ok(o && !json_object_get(o, "fixed"), "plan rules are not marked fixed");
    o = find(arr, "arch", "foreign");
    ok(o && !strcmp(str(o, "action"), "kill_process"), "foreign arch: kill_process");
#if defined(__x86_64__)
    o = find(arr, "abi", "x32");
    ok(o && !strcmp(str(o, "action"), "kill_process"), "x32 abi: kill_process");
#endif
    json_decref(arr);
    free(text);

    /* allow list, booleans off, an unknown syscall */
    int fam[] = {AF_INET6, AF_INET};
    a3s_sc_rule deny[] = {{.syscall = "nosuchsyscall", .errnum = EPERM}};
    a3s_seccomp_plan q;
    memset(&q, 0, sizeof q);
    q.socket_allow = fam;
    q.nsocket_allow = 2;
    q.socket_errnum = EPFNOSUPPORT;
    q.deny = deny;
    q.ndeny = 1;
    text = a3s_seccomp_describe_json(&q);
    arr = text ? json_loads(text, 0, &je) : NULL;
    ok(arr && json_is_array(arr), "second description parses");
    o = arr ? find(arr, "syscall", "socket") : NULL;
    json_t *allow = o ? json_object_get(o, "allow") : NULL;
    ok(o && !strcmp(str(o, "errno"), "EPFNOSUPPORT") && json_array_size(allow) == 2 &&
           !strcmp(sval(json_array_get(allow, 0)), "AF_INET") &&
           !strcmp(sval(json_array_get(allow, 1)), "AF_INET6"),
       "socket: allow [AF_INET, AF_INET6] with the configured errno");
    o = arr ? find(arr, "syscall", "socketpair") : NULL;
    ok(o && !strcmp(str(o, "when"), "any family"),
       "socketpair denied for any family when socketpair_unix is off");
    ok(arr && !find(arr, "syscall", "clone") && !find(arr, "syscall", "clone3") &&
           !find(arr, "syscall", "ioctl"),
       "no clone/clone3/ioctl rules when their booleans are off");
    ok(arr && find(arr, "syscall", "chmod") && find(arr, "syscall", "openat2"),
       "the fixed set-id and openat2 rules are there with the booleans off");
    o = arr ? find(arr, "syscall", "nosuchsyscall") : NULL;
    ok(o && !strcmp(str(o, "error"), "unknown syscall"), "unknown syscall described with an error");
    json_decref(arr);
    free(text);
}

int main(void)
{
    test_export();
    test_describe();
    return tap_done();
}
