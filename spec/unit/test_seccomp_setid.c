/* Unit tests for backends/linux/seccomp.c: set-uid/set-gid files (the fixed rules),
 * under the exported program as bwrap loads it (spec/unit/seccomp_fixture.h). */
#include "seccomp_fixture.h"

/* ---- set-uid/set-gid files (fixed rules), under the exported program as bwrap loads it ---- */

/* The exported program, read back from its memfd (malloc'd filter; 0 or -1). */
static int export_prog(const a3s_seccomp_plan *sp, struct sock_fprog *fp)
{
    a3s_error err;
    struct stat st;
    int fd = a3s_seccomp_export(sp, &err);
    if (fd < 0)
        return -1;
    struct sock_filter *prog = NULL;
    if (fstat(fd, &st) == 0 && st.st_size > 0 && (prog = malloc((size_t)st.st_size)) &&
        pread(fd, prog, (size_t)st.st_size, 0) == (ssize_t)st.st_size) {
        close(fd);
        fp->len = (unsigned short)((size_t)st.st_size / sizeof *prog);
        fp->filter = prog;
        return 0;
    }
    free(prog);
    close(fd);
    return -1;
}

/* Like probe, with a raw BPF program (NULL: unfiltered). */
static int probe_bpf(const struct sock_fprog *fp, call c)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -2000;
    if (pid == 0) {
        child_quiet();
        if (fp && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                   prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, fp, 0, 0) < 0))
            _exit(EXIT_LOAD_FAILED);
        _exit(child_make_call(&c));
    }
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return -3000;
    return decode(st);
}

static unsigned long uptr(const char *s)
{
    return (unsigned long)(uintptr_t)s;
}

/* Set-id bits of path (0 when missing), -1 on another stat error. */
static int setid_bits(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -1;
    return (int)(st.st_mode & (S_ISUID | S_ISGID));
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* path as a regular file with mode 0644 (the same inode when it exists: fchmod's fd). */
static void reset_file(const char *path)
{
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0 || fchmod(fd, 0644) < 0)
        printf("# setup: %s: %s\n", path, strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* Remove whatever the previous case left at path (file or empty directory). */
static void clear(const char *path)
{
    if (unlink(path) < 0 && errno == EISDIR)
        (void)rmdir(path);
}

/* c sets a set-id mode on the existing 0644 file `path`: under fp it must fail with EPERM
 * and leave the mode alone; unfiltered (the control) it must succeed and set a bit. */
static void setid_on_file(const struct sock_fprog *fp, const char *what, const char *path, call c)
{
    int r;
    reset_file(path);
    r = probe_bpf(fp, c);
    ok(r == EPERM && setid_bits(path) == 0, "%s -> EPERM, mode unchanged (got %d, bits 0%o)", what,
       r, (unsigned int)setid_bits(path));
    r = probe_bpf(NULL, c);
    ok(r == 0 && setid_bits(path) > 0, "control: %s unfiltered sets the bit (got %d)", what, r);
    reset_file(path);
}

/* c creates `path` with a set-id mode: under fp EPERM and nothing created; unfiltered it
 * creates path, with a set-id bit unless the kernel drops it (mkdir does: S_ISGID on a
 * directory comes from its parent; the rule is defence in depth, as in systemd). */
static void setid_create(const struct sock_fprog *fp, const char *what, const char *path, call c)
{
    bool dir = c.nr == SYS_mkdirat;
#ifdef SYS_mkdir
    dir = dir || c.nr == SYS_mkdir;
#endif
    int r;
    clear(path);
    r = probe_bpf(fp, c);
    ok(r == EPERM && !exists(path), "%s -> EPERM, nothing created (got %d)", what, r);
    clear(path);
    r = probe_bpf(NULL, c);
    ok(r == 0 && exists(path) && (dir || setid_bits(path) > 0),
       "control: %s unfiltered creates %s (got %d)", what, dir ? "it" : "a set-id file", r);
    clear(path);
}

static void test_setid(void)
{
    const char *tmp = getenv("TMPDIR");
    char dir[256], f[300], n[300];
    snprintf(dir, sizeof dir, "%s/a3s-test-setid-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        ok(0, "mkdtemp %s: %s", dir, strerror(errno));
        return;
    }
    snprintf(f, sizeof f, "%s/f", dir);
    snprintf(n, sizeof n, "%s/n", dir);
    a3s_seccomp_plan p = baseline_plan();
    struct sock_fprog fp;
    if (export_prog(&p, &fp) < 0) {
        ok(0, "export the baseline filter");
        return;
    }
    int r;
    const unsigned long at = (unsigned long)AT_FDCWD;

    /* mode-changing calls on an existing file */
#ifdef SYS_chmod
    setid_on_file(&fp, "chmod 04755", f, mk(SYS_chmod, uptr(f), 04755, 0, 0));
    setid_on_file(&fp, "chmod 02755", f, mk(SYS_chmod, uptr(f), 02755, 0, 0));
    setid_on_file(&fp, "chmod 06755 | 1<<32", f, mk(SYS_chmod, uptr(f), (1UL << 32) | 06755, 0, 0));
    reset_file(f);
    ok((r = probe_bpf(&fp, mk(SYS_chmod, uptr(f), 0755, 0, 0))) == 0 && setid_bits(f) == 0,
       "chmod 0755 allowed (got %d)", r);
    ok((r = probe_bpf(&fp, mk(SYS_chmod, uptr(f), 01600, 0, 0))) == 0,
       "chmod 01600 (sticky) allowed (got %d)", r);
#endif
    setid_on_file(&fp, "fchmodat 04755", f, mk(SYS_fchmodat, at, uptr(f), 04755, 0));
    setid_on_file(&fp, "fchmodat 02755", f, mk(SYS_fchmodat, at, uptr(f), 02755, 0));
    reset_file(f);
    ok((r = probe_bpf(&fp, mk(SYS_fchmodat, at, uptr(f), 0600, 0))) == 0,
       "fchmodat 0600 allowed (got %d)", r);

    /* fchmod on an fd opened before the fork */
    reset_file(f);
    int fd = open(f, O_RDONLY | O_CLOEXEC);
    ok(fd >= 0, "open the fchmod target");
    if (fd >= 0) {
        setid_on_file(&fp, "fchmod 04755", f, mk(SYS_fchmod, (unsigned long)fd, 04755, 0, 0));
        setid_on_file(&fp, "fchmod 02755", f, mk(SYS_fchmod, (unsigned long)fd, 02755, 0, 0));
        ok((r = probe_bpf(&fp, mk(SYS_fchmod, (unsigned long)fd, 0755, 0, 0))) == 0,
           "fchmod 0755 allowed (got %d)", r);
        close(fd);
    }

    /* fchmodat2: EPERM when libseccomp knows it, ENOSYS (libc falls back) otherwise */
    call c2 = mk(SYS_fchmodat2, at, uptr(f), 04755, 0);
    reset_file(f);
    r = probe_bpf(&fp, c2);
    ok((r == EPERM || r == ENOSYS) && setid_bits(f) == 0,
       "fchmodat2 04755 -> EPERM or ENOSYS, mode unchanged (got %d)", r);
    int ctl = probe_bpf(NULL, c2);
    if (ctl == ENOSYS)
        printf("# fchmodat2 control skipped: the kernel has no fchmodat2\n");
    else
        ok(ctl == 0 && setid_bits(f) > 0, "control: fchmodat2 04755 unfiltered works (got %d)",
           ctl);
    reset_file(f);

    /* creation with a set-id mode */
#ifdef SYS_mkdir
    setid_create(&fp, "mkdir 02755", n, mk(SYS_mkdir, uptr(n), 02755, 0, 0));
    setid_create(&fp, "mkdir 04755", n, mk(SYS_mkdir, uptr(n), 04755, 0, 0));
    ok((r = probe_bpf(&fp, mk(SYS_mkdir, uptr(n), 01777, 0, 0))) == 0 && setid_bits(n) == 0,
       "mkdir 01777 allowed (got %d)", r);
    clear(n);
#endif
    setid_create(&fp, "mkdirat 02755", n, mk(SYS_mkdirat, at, uptr(n), 02755, 0));
#ifdef SYS_mknod
    setid_create(&fp, "mknod S_IFREG|04755", n, mk(SYS_mknod, uptr(n), S_IFREG | 04755, 0, 0));
#endif
    setid_create(&fp, "mknodat S_IFREG|02755", n, mk(SYS_mknodat, at, uptr(n), S_IFREG | 02755, 0));
    ok((r = probe_bpf(&fp, mk(SYS_mknodat, at, uptr(n), S_IFREG | 0644, 0))) == 0,
       "mknodat S_IFREG|0644 allowed (got %d)", r);
    clear(n);
#ifdef SYS_open
    setid_create(&fp, "open O_CREAT 04755", n,
                 mk(SYS_open, uptr(n), O_CREAT | O_WRONLY | O_CLOEXEC, 04755, 0));
    setid_create(&fp, "open O_CREAT|O_EXCL 02755", n,
                 mk(SYS_open, uptr(n), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 02755, 0));
#endif
    setid_create(&fp, "openat O_CREAT 04755", n,
                 mk(SYS_openat, at, uptr(n), O_CREAT | O_WRONLY | O_CLOEXEC, 04755));
    setid_create(&fp, "openat O_CREAT 06755 | 1<<32", n,
                 mk(SYS_openat, at, uptr(n), O_CREAT | O_WRONLY, (1UL << 32) | 06755));
#ifdef SYS_creat
    setid_create(&fp, "creat 04755", n, mk(SYS_creat, uptr(n), 04755, 0, 0));
#endif
    ok((r = probe_bpf(&fp, mk(SYS_openat, at, uptr(n), O_CREAT | O_WRONLY, 0644))) == 0 &&
           exists(n),
       "openat O_CREAT 0644 allowed (got %d)", r);
    ok((r = probe_bpf(&fp, mk(SYS_openat, at, uptr(n), O_RDONLY, 04755))) == 0 &&
           setid_bits(n) == 0,
       "openat without O_CREAT ignores the mode: allowed (got %d)", r);
    clear(n);

    /* O_TMPFILE has no O_CREAT bit: refused through its own bit */
    call tmpf = mk(SYS_openat, at, uptr(dir), O_TMPFILE | O_RDWR, 04755);
    r = probe_bpf(&fp, tmpf);
    ok(r == EPERM, "openat O_TMPFILE 04755 -> EPERM (got %d)", r);
    ctl = probe_bpf(NULL, tmpf);
    if (ctl == EOPNOTSUPP || ctl == EISDIR)
        printf("# O_TMPFILE control skipped: unsupported here (%d)\n", ctl);
    else
        ok(ctl == 0, "control: O_TMPFILE 04755 unfiltered works (got %d)", ctl);
    ok((r = probe_bpf(&fp, mk(SYS_openat, at, uptr(dir), O_TMPFILE | O_RDWR, 0600))) == ctl,
       "openat O_TMPFILE 0600 as unfiltered (got %d)", r);

    /* openat2: flags in memory, ENOSYS so libc falls back to openat */
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_RDONLY | O_CLOEXEC;
    call o2 = mk(SYS_openat2, at, uptr(dir), (unsigned long)(uintptr_t)&how, sizeof how);
    ok((r = probe_bpf(&fp, o2)) == ENOSYS, "openat2 -> ENOSYS (got %d)", r);
    ok((r = probe_bpf(NULL, o2)) == 0, "control: openat2 unfiltered works (got %d)", r);

#if defined(__x86_64__)
    ok((r = probe_bpf(&fp, mk(X32_BIT | SYS_fchmodat, at, uptr(f), 04755, 0))) == -SIGSYS &&
           setid_bits(f) == 0,
       "x32 fchmodat 04755 -> killed by SIGSYS (got %d)", r);
#endif
    free(fp.filter);

    /* fixed: also with every plan boolean off and an empty deny list */
    a3s_seccomp_plan bare;
    memset(&bare, 0, sizeof bare);
    bare.socket_errnum = EPERM;
    if (export_prog(&bare, &fp) == 0) {
        setid_create(&fp, "bare plan: mkdirat 02755", n, mk(SYS_mkdirat, at, uptr(n), 02755, 0));
        setid_on_file(&fp, "bare plan: fchmodat 04755", f, mk(SYS_fchmodat, at, uptr(f), 04755, 0));
        ok((r = probe_bpf(&fp, o2)) == ENOSYS, "bare plan: openat2 -> ENOSYS (got %d)", r);
        free(fp.filter);
    } else {
        ok(0, "export the bare filter");
    }

    /* a plan rule denying the syscall outright takes the fixed rule's place */
    a3s_sc_rule deny[] = {{.syscall = "fchmodat", .errnum = EACCES},
                          {.syscall = "openat2", .errnum = EPERM}};
    p.deny = deny;
    p.ndeny = 2;
    if (export_prog(&p, &fp) == 0) {
        ok((r = probe_bpf(&fp, mk(SYS_fchmodat, at, uptr(f), 04755, 0))) == EACCES,
           "deny fchmodat EACCES: fchmodat 04755 -> EACCES (got %d)", r);
        ok((r = probe_bpf(&fp, mk(SYS_fchmodat, at, uptr(f), 0755, 0))) == EACCES,
           "deny fchmodat EACCES: fchmodat 0755 -> EACCES (got %d)", r);
        ok((r = probe_bpf(&fp, o2)) == EPERM, "deny openat2 EPERM: openat2 -> EPERM (got %d)", r);
        setid_create(&fp, "deny fchmodat: mkdirat 02755 still", n,
                     mk(SYS_mkdirat, at, uptr(n), 02755, 0));
        free(fp.filter);
    } else {
        ok(0, "export the filter with plan denies");
    }

    clear(f);
    clear(n);
    if (rmdir(dir) < 0)
        printf("# cleanup: rmdir %s: %s\n", dir, strerror(errno));
}

int main(void)
{
    test_setid();
    return tap_done();
}
