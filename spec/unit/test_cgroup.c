/* Unit tests of backends/linux/cgroup.c and cgroup_probe.c.
 *
 * Fail-closed paths (always run): roots that are missing, a regular file, a symbolic
 * link, unclean, a look-alike tree of ordinary directories, and (as root) the real
 * hierarchies bound read-only in a private mount namespace: every quota is refused with
 * a reason, create fails with A3S_ERR_SETUP naming the quota, and nothing is created.
 *
 * Real effects (as root, where the cgroup hierarchies are writable; otherwise "# skip"):
 * pids=8 bounds the forks of a tree and counts the refusals, a 32 MiB memory limit gets
 * a 128 MiB toucher SIGKILLed and counted, 200 millicores throttle a busy loop, destroy
 * kills what is still inside and removes every directory, a failure half-way leaves
 * nothing behind, and no descriptor leaks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "tap.h"
#include "util.h"

#define MIB (1024 * 1024)

static const char *const qname[A3S_QUOTA_COUNT] = {"pids", "memory", "cpu"};

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static bool exists(const char *p)
{
    struct stat st;
    return lstat(p, &st) == 0;
}

/* First line of a file, without the newline ("" when unreadable). */
static void read_line(const char *path, char *buf, size_t sz)
{
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    if (!fgets(buf, (int)sz, f))
        buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
}

/* The value of "key N" in a file, or -1. */
static long long file_key(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
            v = atoll(line + kl + 1);
    fclose(f);
    return v;
}

static int count_lines(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int n = 0, c;
    while ((c = fgetc(f)) != EOF)
        n += c == '\n';
    fclose(f);
    return n;
}

/* The caller's cgroup in the v1 hierarchy of ctrl, parsed independently of the module. */
static bool self_v1(const char *ctrl, char *out, size_t sz)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *tok, *save = NULL;
        for (tok = strtok_r(c1 + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            if (strcmp(tok, ctrl) == 0) {
                snprintf(out, sz, "%s", c2 + 1);
                found = true;
            }
    }
    fclose(f);
    return found;
}

/* Whether root can make a directory in /sys/fs/cgroup/<ctrl><own cgroup> (v1), checked
 * without the module. */
static bool v1_writable(const char *ctrl)
{
    char self[2048], dir[4096], probe[4200];
    if (!self_v1(ctrl, self, sizeof self))
        return false;
    snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s%s", ctrl, strcmp(self, "/") ? self : "");
    snprintf(probe, sizeof probe, "%s/a3s-test-writable-%d", dir, (int)getpid());
    if (mkdir(probe, 0755) != 0)
        return false;
    rmdir(probe);
    return true;
}

/* Whether v2 offers ctrl at the unified root (then the module may rightly pick v2). */
static bool v2_offers(const char *ctrl)
{
    char buf[512];
    read_line("/sys/fs/cgroup/unified/cgroup.controllers", buf, sizeof buf);
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (strcmp(t, ctrl) == 0)
            return true;
    read_line("/sys/fs/cgroup/cgroup.controllers", buf, sizeof buf);
    save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save))
        if (strcmp(t, ctrl) == 0)
            return true;
    return false;
}

static void cg_path(const a3s_cgroup_caps *caps, int q, const char *id, char *out, size_t sz)
{
    snprintf(out, sz, "%s/a3s-sandbox-%s", caps->dir[q], id);
}

/* Whether any entry named a3s-sandbox* exists below dir (depth-limited walk). */
static bool tree_has_a3s(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (strncmp(e->d_name, "a3s-sandbox", 11) == 0) {
            found = true;
            break;
        }
        char sub[4096];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        struct stat st;
        if (depth > 0 && lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
            found = tree_has_a3s(sub, depth - 1);
    }
    closedir(d);
    return found;
}

/* Whether dir holds a probe child of this process (other runs may have their own). */
static bool has_probe_child(const char *dir)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "a3s-sandbox-probe-%d-", (int)getpid());
    DIR *d = opendir(dir);
    if (!d)
        return false;
    bool found = false;
    struct dirent *e;
    while (!found && (e = readdir(d)))
        found = strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return found;
}

/* ---------------------------------------------------------------- arguments */

static void test_arguments(void)
{
    a3s_cgroup_caps caps;
    memset(&caps, 0, sizeof caps);
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        caps.can[q] = true; /* forged: argument checks come before any file access */
        snprintf(caps.via[q], sizeof caps.via[q], "cgroup v1 %s", qname[q]);
        snprintf(caps.dir[q], sizeof caps.dir[q], "/nonexistent-a3s-test");
    }
    a3s_cgroup *cg = (a3s_cgroup *)&caps; /* must be reset to NULL */
    a3s_error err = {0};
    a3s_cgroup_limits none = {0, 0, 0};
    ok(a3s_cgroup_create(&caps, &none, "x", &cg, &err) == 0 && cg == NULL,
       "no limit requested: 0 and no cgroup");

    a3s_cgroup_limits neg = {-1, 0, 0};
    cg = (a3s_cgroup *)&caps;
    ok(a3s_cgroup_create(&caps, &neg, "x", &cg, &err) < 0 && err.code == A3S_ERR_INVALID &&
           cg == NULL && strstr(err.msg, "pids"),
       "negative pids limit: invalid (%s)", err.msg);
    a3s_cgroup_limits tiny = {0, 0, 5};
    ok(a3s_cgroup_create(&caps, &tiny, "x", &cg, &err) < 0 && err.code == A3S_ERR_INVALID &&
           strstr(err.msg, "cpu"),
       "5 millicores (below the kernel's 1 ms / 100 ms): invalid (%s)", err.msg);
    a3s_cgroup_limits pids = {8, 0, 0};
    const char *bad_ids[] = {"", "../x", "a/b", "a b", "x\n"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        memset(&err, 0, sizeof err);
        ok(a3s_cgroup_create(&caps, &pids, bad_ids[i], &cg, &err) < 0 &&
               err.code == A3S_ERR_INVALID && cg == NULL,
           "id #%zu refused as invalid", i);
    }
    ok(a3s_cgroup_destroy(NULL) == 0, "destroy(NULL) is a no-op");
    int fds[4];
    ok(a3s_cgroup_join_fds(NULL, fds, 4) == 0, "join_fds(NULL) = 0");
    a3s_cgroup_events ev = {7, 7};
    a3s_cgroup_events_read(NULL, &ev);
    ok(ev.oom_kills == 0 && ev.pids_max == 0, "events of NULL are zero");
}

/* ---------------------------------------------------------------- fail closed */

/* caps from `root` must refuse every quota with a reason containing `reason`, and create
 * must fail with A3S_ERR_SETUP naming the quota and the reason. */
static void expect_refused(const char *label, const char *root, const char *reason)
{
    a3s_cgroup_caps caps;
    a3s_cgroup_probe(root, &caps);
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        ok(!caps.can[q] && strncmp(caps.why_not[q], "no writable cgroup: ", 20) == 0 &&
               (!reason || strstr(caps.why_not[q], reason)),
           "%s: %s refused: %s", label, qname[q], caps.why_not[q]);
    }
    ok(!caps.v2, "%s: v2 not claimed", label);
    const a3s_cgroup_limits lims[A3S_QUOTA_COUNT] = {{8, 0, 0}, {0, 32 * MIB, 0}, {0, 0, 200}};
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        a3s_cgroup *cg = NULL;
        a3s_error err = {0};
        char want[64];
        snprintf(want, sizeof want, "cannot enforce the %s quota: ", qname[q]);
        int rc = a3s_cgroup_create(&caps, &lims[q], "failclosed", &cg, &err);
        ok(rc < 0 && cg == NULL && err.code == A3S_ERR_SETUP && strstr(err.msg, want) &&
               strstr(err.msg, caps.why_not[q]),
           "%s: create with a %s limit fails closed: %s", label, qname[q], err.msg);
    }
}

static void test_fake_roots(void)
{
    char tmp[] = "/tmp/a3s-test-cgroup-XXXXXX";
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    char p[4096];

    snprintf(p, sizeof p, "%s/does-not-exist", tmp);
    expect_refused("missing root", p, "ENOENT");

    snprintf(p, sizeof p, "%s/file", tmp);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    expect_refused("regular-file root", p, "ENOTDIR");

    /* a link to the real hierarchy is not followed */
    snprintf(p, sizeof p, "%s/link", tmp);
    ok(symlink("/sys/fs/cgroup", p) == 0, "symlink made");
    expect_refused("symlinked root", p, "cgroup root unusable (");

    expect_refused("relative root", "sys/fs/cgroup", "clean absolute path");
    expect_refused("root with ..", "/sys/fs/cgroup/../cgroup", "clean absolute path");
    expect_refused("root with an escape", "/sys/fs/cgroup\\040x", "clean absolute path");

    /* A look-alike tree: the caller's own paths and the control files exist, as plain
     * directories and files; it must not be mistaken for a cgroup filesystem, and not
     * be written to. */
    char fake[512];
    snprintf(fake, sizeof fake, "%s/fake", tmp);
    mkdir(fake, 0755);
    const char *dirs[] = {"pids", "memory", "cpu", "unified"};
    for (size_t i = 0; i < 4; i++) {
        char self[2048] = "/";
        if (i < 3)
            self_v1(dirs[i], self, sizeof self);
        char d[2600];
        snprintf(d, sizeof d, "%s/%s%s", fake, dirs[i], strcmp(self, "/") ? self : "");
        char cmd[6000];
        snprintf(cmd, sizeof cmd,
                 "mkdir -p '%s' && for f in cgroup.procs cgroup.controllers "
                 "cgroup.subtree_control pids.max memory.limit_in_bytes cpu.cfs_quota_us; do "
                 "echo 'pids memory cpu' > '%s'/$f; done",
                 d, d);
        ok(system(cmd) == 0, "look-alike %s made", dirs[i]);
    }
    expect_refused("look-alike tree", fake, "not a cgroup v1 hierarchy");
    ok(!tree_has_a3s(fake, 8), "look-alike tree: nothing created in it");

    /* A pure cgroup v2 root (the unified mount of this hybrid host seen as the root):
     * v1 is looked for below it and not found; v2 is used only if it really delegates. */
    struct statfs sf;
    if (statfs("/sys/fs/cgroup/unified", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC) {
        a3s_cgroup_caps caps;
        a3s_cgroup_probe("/sys/fs/cgroup/unified", &caps);
        for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
            char v1[128];
            snprintf(v1, sizeof v1, "v1 %s hierarchy not", qname[q]);
            if (caps.can[q])
                ok_streq(caps.via[q], "cgroup v2", "pure v2 root: via v2");
            else
                ok(strstr(caps.why_not[q], "v2") && strstr(caps.why_not[q], v1),
                   "pure v2 root: %s refused: %s", qname[q], caps.why_not[q]);
        }
    } else {
        printf("# skip pure-v2 root probe: /sys/fs/cgroup/unified is not cgroup2\n");
    }
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    ok(system(cmd) == 0, "temp dir removed");
}

/* The real hierarchies bound read-only (as root, in a private mount namespace): the
 * filesystems are genuine cgroups, the mkdir of the probe fails with EROFS. */
typedef struct ro_result {
    int ready;
    a3s_cgroup_caps caps;
    int rc, code;
    char msg[2048];
} ro_result;

static void test_readonly_bind(void)
{
    if (geteuid() != 0) {
        printf("# skip read-only bind test: not root\n");
        return;
    }
    char tmp[] = "/tmp/a3s-test-cgroup-ro-XXXXXX";
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    ro_result *res =
        mmap(NULL, sizeof *res, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (res == MAP_FAILED) {
        ok(0, "mmap: %s", strerror(errno));
        return;
    }
    memset(res, 0, sizeof *res);
    const char *ctrls[] = {"pids", "memory", "cpu"};
    char id[64];
    snprintf(id, sizeof id, "t%d-ro", (int)getpid());
    pid_t c = fork();
    if (c == 0) {
        if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL))
            _exit(2);
        for (size_t i = 0; i < 3; i++) {
            char src[256], dst[4096];
            snprintf(src, sizeof src, "/sys/fs/cgroup/%s", ctrls[i]);
            snprintf(dst, sizeof dst, "%s/%s", tmp, ctrls[i]);
            if (mkdir(dst, 0755) != 0 || mount(src, dst, NULL, MS_BIND, NULL) != 0 ||
                mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) != 0)
                _exit(3);
        }
        a3s_cgroup_probe(tmp, &res->caps);
        a3s_cgroup *cg = NULL;
        a3s_error err = {0};
        a3s_cgroup_limits lim = {8, 32 * MIB, 200};
        res->rc = a3s_cgroup_create(&res->caps, &lim, id, &cg, &err);
        res->code = err.code;
        memcpy(res->msg, err.msg, sizeof res->msg);
        (void)a3s_cgroup_destroy(cg);
        res->ready = 1;
        _exit(0);
    }
    int st = -1;
    waitpid(c, &st, 0);
    ok(WIFEXITED(st) && WEXITSTATUS(st) == 0 && res->ready,
       "read-only bind: the private-namespace child ran (status %d)", st);
    if (res->ready) {
        for (int q = 0; q < A3S_QUOTA_COUNT; q++)
            ok(!res->caps.can[q] && strstr(res->caps.why_not[q], "not writable (EROFS)"),
               "read-only cgroup: %s refused: %s", qname[q], res->caps.why_not[q]);
        ok(res->rc < 0 && res->code == A3S_ERR_SETUP &&
               strstr(res->msg, "cannot enforce the pids quota") && strstr(res->msg, "EROFS"),
           "read-only cgroup: create fails closed: %s", res->msg);
    }
    for (size_t i = 0; i < 3; i++) {
        char self[2048] = "/", d[4200];
        self_v1(ctrls[i], self, sizeof self);
        snprintf(d, sizeof d, "/sys/fs/cgroup/%s%s/a3s-sandbox-%s", ctrls[i],
                 strcmp(self, "/") ? self : "", id);
        ok(!exists(d), "read-only cgroup: nothing created (%s)", d);
        snprintf(d, sizeof d, "%s/%s", tmp, ctrls[i]);
        rmdir(d);
    }
    ok(rmdir(tmp) == 0, "read-only bind: temp dir removed (the mounts died with the child)");
    munmap(res, sizeof *res);
}

/* ---------------------------------------------------------------- real effects */

/* Reap children that ended up with us (we are a subreaper), for up to ms: how many were
 * killed by SIGKILL, stored in *killed; returns how many were reaped. */
static int reap_orphans(int want, int ms, int *killed)
{
    int n = 0;
    *killed = 0;
    unsigned long long end = a3s_now_ms() + (unsigned long long)ms;
    while (n < want && a3s_now_ms() < end) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG);
        if (p > 0) {
            n++;
            if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
                (*killed)++;
            continue;
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return n;
}

static void join_all(const a3s_cgroup *cg)
{
    int fds[4];
    size_t n = a3s_cgroup_join_fds(cg, fds, 4);
    for (size_t i = 0; i < n; i++)
        if (write(fds[i], "0", 1) != 1)
            _exit(100);
}

static void test_pids(const a3s_cgroup_caps *caps)
{
    char id[64], path[4200], f[4300], buf[64];
    snprintf(id, sizeof id, "t%d-pids", (int)getpid());
    a3s_cgroup_limits lim = {8, 0, 0};
    a3s_cgroup *cg = NULL;
    a3s_error err = {0};
    ok(a3s_cgroup_create(caps, &lim, id, &cg, &err) == 0 && cg, "pids=8: created (%s)", err.msg);
    if (!cg)
        return;
    cg_path(caps, A3S_QUOTA_PIDS, id, path, sizeof path);
    snprintf(f, sizeof f, "%s/pids.max", path);
    read_line(f, buf, sizeof buf);
    ok_streq(buf, "8", "pids.max is 8");
    int fds[4];
    ok(a3s_cgroup_join_fds(cg, fds, 4) == 1, "one cgroup to join");

    pid_t c = fork();
    if (c == 0) {
        join_all(cg);
        int made = 0;
        for (int i = 0; i < 20; i++) {
            pid_t g = fork();
            if (g == 0) {
                pause();
                _exit(0);
            }
            if (g > 0)
                made++;
        }
        _exit(made);
    }
    int st = -1;
    waitpid(c, &st, 0);
    int made = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    printf("# pids=8: the joined child forked %d of 20 (it is the 8th process)\n", made);
    ok(made >= 1 && made <= 7, "pids=8: at most 8 processes in the tree (%d children)", made);
    snprintf(f, sizeof f, "%s/cgroup.procs", path);
    int members = count_lines(f);
    ok(members == made, "pids=8: the %d sleeping children are inside (%d members)", made, members);
    a3s_cgroup_events ev;
    a3s_cgroup_events_read(cg, &ev);
    printf("# pids=8: pids_max event count %llu\n", (unsigned long long)ev.pids_max);
    ok(ev.pids_max >= 1 && ev.pids_max <= 20, "pids=8: refused forks counted (%llu)",
       (unsigned long long)ev.pids_max);
    ok(ev.oom_kills == 0, "pids=8: no oom kill");

    unsigned long long t0 = a3s_now_ms();
    ok(a3s_cgroup_destroy(cg) == 0, "pids=8: destroy with live members succeeds (%llu ms)",
       a3s_now_ms() - t0);
    ok(!exists(path), "pids=8: the cgroup directory is gone");
    int killed;
    int reaped = reap_orphans(made, 20000, &killed); /* returns once all are reaped */
    ok(reaped == made && killed == made, "pids=8: destroy SIGKILLed all %d children (%d/%d)", made,
       killed, reaped);
}

static void test_memory(const a3s_cgroup_caps *caps)
{
    char id[64], path[4200], f[4300], buf[64];
    snprintf(id, sizeof id, "t%d-mem", (int)getpid());
    a3s_cgroup_limits lim = {0, 32 * MIB, 0};
    a3s_cgroup *cg = NULL;
    a3s_error err = {0};
    ok(a3s_cgroup_create(caps, &lim, id, &cg, &err) == 0 && cg, "memory 32 MiB: created (%s)",
       err.msg);
    if (!cg)
        return;
    bool v2 = strcmp(caps->via[A3S_QUOTA_MEMORY], "cgroup v2") == 0;
    cg_path(caps, A3S_QUOTA_MEMORY, id, path, sizeof path);
    snprintf(f, sizeof f, "%s/%s", path, v2 ? "memory.max" : "memory.limit_in_bytes");
    read_line(f, buf, sizeof buf);
    ok_streq(buf, "33554432", "memory limit is 32 MiB");
    if (v2) {
        snprintf(f, sizeof f, "%s/memory.swap.max", path);
        if (exists(f)) {
            read_line(f, buf, sizeof buf);
            ok_streq(buf, "0", "memory.swap.max is 0");
        }
    } else {
        snprintf(f, sizeof f, "%s/memory.memsw.limit_in_bytes", path);
        if (exists(f)) {
            read_line(f, buf, sizeof buf);
            ok_streq(buf, "33554432", "memory+swap limit equals the memory limit");
        }
        snprintf(f, sizeof f, "%s/memory.oom_control", path);
        ok(file_key(f, "oom_kill_disable") == 0, "the OOM killer is enabled");
    }

    pid_t c = fork();
    if (c == 0) {
        join_all(cg);
        size_t sz = 128 * MIB;
        volatile char *m =
            mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            _exit(3);
        for (size_t i = 0; i < sz; i += 4096)
            m[i] = 1;
        _exit(0);
    }
    int st = -1;
    waitpid(c, &st, 0);
    ok(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
       "memory 32 MiB: touching 128 MiB is killed by SIGKILL (status 0x%x)", st);
    a3s_cgroup_events ev;
    a3s_cgroup_events_read(cg, &ev);
    printf("# memory 32 MiB: oom_kills %llu\n", (unsigned long long)ev.oom_kills);
    snprintf(f, sizeof f, "%s/%s", path, v2 ? "memory.events" : "memory.oom_control");
    if (file_key(f, "oom_kill") >= 0) {
        ok(ev.oom_kills >= 1, "memory 32 MiB: oom kill counted (%llu)",
           (unsigned long long)ev.oom_kills);
    } else {
        snprintf(f, sizeof f, "%s/memory.failcnt", path);
        read_line(f, buf, sizeof buf);
        ok(atoll(buf) > 0, "memory 32 MiB: no oom_kill counter here; failcnt %s > 0", buf);
    }
    ok(ev.pids_max == 0, "memory 32 MiB: no pids event");
    ok(a3s_cgroup_destroy(cg) == 0, "memory: destroyed");
    ok(!exists(path), "memory: the cgroup directory is gone");
}

static double busy_child(const a3s_cgroup *cg, int wall_ms)
{
    pid_t c = fork();
    if (c == 0) {
        if (cg)
            join_all(cg);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        volatile unsigned long x = 0;
        do {
            for (int i = 0; i < 100000; i++)
                x++;
            clock_gettime(CLOCK_MONOTONIC, &b);
        } while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < wall_ms);
        _exit(0);
    }
    int st;
    struct rusage ru;
    if (wait4(c, &st, 0, &ru) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1; /* e.g. the child could not join (exit 100) */
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static void test_cpu(const a3s_cgroup_caps *caps)
{
    char id[64], path[4200], f[4300], buf[64];
    snprintf(id, sizeof id, "t%d-cpu", (int)getpid());
    a3s_cgroup_limits lim = {0, 0, 200};
    a3s_cgroup *cg = NULL;
    a3s_error err = {0};
    ok(a3s_cgroup_create(caps, &lim, id, &cg, &err) == 0 && cg, "cpu 200m: created (%s)", err.msg);
    if (!cg)
        return;
    cg_path(caps, A3S_QUOTA_CPU, id, path, sizeof path);
    if (strcmp(caps->via[A3S_QUOTA_CPU], "cgroup v2") == 0) {
        snprintf(f, sizeof f, "%s/cpu.max", path);
        read_line(f, buf, sizeof buf);
        ok_streq(buf, "20000 100000", "cpu.max is 20000 100000");
    } else {
        snprintf(f, sizeof f, "%s/cpu.cfs_quota_us", path);
        read_line(f, buf, sizeof buf);
        ok_streq(buf, "20000", "cpu.cfs_quota_us is 20000");
        snprintf(f, sizeof f, "%s/cpu.cfs_period_us", path);
        read_line(f, buf, sizeof buf);
        ok_streq(buf, "100000", "cpu.cfs_period_us is 100000");
    }
    double base = busy_child(NULL, 500);
    printf("# cpu: unlimited busy loop, 0.5 s wall: %.3f s CPU\n", base);
    double used = busy_child(cg, 1000);
    printf("# cpu 200 millicores: busy loop, 1 s wall: %.3f s CPU\n", used);
    /* Only an upper bound: load can only lower the CPU time. A child that did not run
     * its loop in the cgroup is -1. */
    ok(used >= 0 && used < 0.6, "cpu 200m: 1 s of busy loop got %.3f s CPU (< 0.6)", used);
    ok(a3s_cgroup_destroy(cg) == 0, "cpu: destroyed");
    ok(!exists(path), "cpu: the cgroup directory is gone");
}

/* All three at once: one directory per hierarchy, the child is in every one. */
static void test_all(const a3s_cgroup_caps *caps)
{
    char id[64], paths[A3S_QUOTA_COUNT][4200];
    snprintf(id, sizeof id, "t%d-all", (int)getpid());
    a3s_cgroup_limits lim = {16, 64 * MIB, 500};
    a3s_cgroup *cg = NULL;
    a3s_error err = {0};
    ok(a3s_cgroup_create(caps, &lim, id, &cg, &err) == 0 && cg, "all quotas: created (%s)",
       err.msg);
    if (!cg)
        return;
    size_t distinct = 0;
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        cg_path(caps, q, id, paths[q], sizeof paths[q]);
        bool seen = false;
        for (int r = 0; r < q; r++)
            seen = seen || strcmp(paths[r], paths[q]) == 0;
        distinct += !seen;
        ok(exists(paths[q]), "all quotas: %s exists", paths[q]);
    }
    int fds[4];
    ok(a3s_cgroup_join_fds(cg, fds, 4) == distinct, "all quotas: %zu cgroups to join", distinct);
    pid_t c = fork();
    if (c == 0) {
        join_all(cg);
        char name[128], line[4096];
        snprintf(name, sizeof name, "/a3s-sandbox-%s", id);
        FILE *pf = fopen("/proc/self/cgroup", "re");
        int in = 0;
        while (pf && fgets(line, sizeof line, pf)) {
            line[strcspn(line, "\n")] = '\0';
            size_t l = strlen(line), nl = strlen(name);
            if (l >= nl && strcmp(line + l - nl, name) == 0)
                in++;
        }
        if (pf)
            fclose(pf);
        _exit(in);
    }
    int st = -1;
    waitpid(c, &st, 0);
    ok(WIFEXITED(st) && (size_t)WEXITSTATUS(st) == distinct,
       "all quotas: the child is in each of the %zu cgroups (%d)", distinct,
       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    ok(a3s_cgroup_destroy(cg) == 0, "all quotas: destroyed");
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        ok(!exists(paths[q]), "all quotas: %s is gone", paths[q]);
}

/* Fail closed with working caps: an unenforceable quota refuses before anything is made;
 * a failure half-way removes what was already made. */
static void test_partial(const a3s_cgroup_caps *real)
{
    char id[64], p[4200];
    snprintf(id, sizeof id, "t%d-part", (int)getpid());
    a3s_cgroup_caps caps = *real;
    caps.can[A3S_QUOTA_MEMORY] = false;
    snprintf(caps.why_not[A3S_QUOTA_MEMORY], sizeof caps.why_not[0],
             "no writable cgroup: test says so");
    a3s_cgroup_limits lim = {8, 32 * MIB, 0};
    a3s_cgroup *cg = NULL;
    a3s_error err = {0};
    ok(a3s_cgroup_create(&caps, &lim, id, &cg, &err) < 0 && cg == NULL &&
           err.code == A3S_ERR_SETUP &&
           strstr(err.msg, "cannot enforce the memory quota: no writable cgroup: test says so"),
       "memory not enforceable: refused (%s)", err.msg);
    cg_path(real, A3S_QUOTA_PIDS, id, p, sizeof p);
    ok(!exists(p), "memory not enforceable: no pids cgroup was made either");

    /* cpu "probed" into a directory that is not a cgroup: pids and memory are made
     * first, then the cpu one fails its filesystem check and everything is undone. */
    caps = *real;
    char tmp[] = "/tmp/a3s-test-cgroup-part-XXXXXX";
    if (!mkdtemp(tmp)) {
        ok(0, "mkdtemp");
        return;
    }
    snprintf(caps.dir[A3S_QUOTA_CPU], sizeof caps.dir[0], "%s", tmp);
    snprintf(caps.via[A3S_QUOTA_CPU], sizeof caps.via[0], "cgroup v1 cpu");
    a3s_cgroup_limits all = {8, 32 * MIB, 200};
    memset(&err, 0, sizeof err);
    ok(a3s_cgroup_create(&caps, &all, id, &cg, &err) < 0 && cg == NULL &&
           err.code == A3S_ERR_SETUP && strstr(err.msg, "cannot set up the cpu quota: ") &&
           strstr(err.msg, "not a cgroup"),
       "failure half-way: setup error (%s)", err.msg);
    for (int q = 0; q < A3S_QUOTA_COUNT; q++) {
        cg_path(&caps, q, id, p, sizeof p);
        ok(!exists(p), "failure half-way: %s not left behind", p);
    }
    rmdir(tmp);
}

static void test_real(void)
{
    if (geteuid() != 0) {
        printf("# skip real-effect tests: not root\n");
        return;
    }
    a3s_cgroup_caps caps;
    a3s_cgroup_probe(NULL, &caps);
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        printf("# probe %s: %s%s%s%s\n", qname[q],
               caps.can[q] ? "via " : "refused: ", caps.can[q] ? caps.via[q] : caps.why_not[q],
               caps.can[q] ? " in " : "", caps.can[q] ? caps.dir[q] : "");
    bool pw = v1_writable("pids"), mw = v1_writable("memory"), cw = v1_writable("cpu");
    if (pw && !v2_offers("pids"))
        ok(caps.can[A3S_QUOTA_PIDS] && strcmp(caps.via[A3S_QUOTA_PIDS], "cgroup v1 pids") == 0,
           "probe: pids enforceable via cgroup v1 pids");
    if (mw && !v2_offers("memory"))
        ok(caps.can[A3S_QUOTA_MEMORY] &&
               strcmp(caps.via[A3S_QUOTA_MEMORY], "cgroup v1 memory") == 0,
           "probe: memory enforceable via cgroup v1 memory");
    if (cw && !v2_offers("cpu"))
        ok(caps.can[A3S_QUOTA_CPU] && strcmp(caps.via[A3S_QUOTA_CPU], "cgroup v1 cpu") == 0,
           "probe: cpu enforceable via cgroup v1 cpu");
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        ok(caps.can[q] ? caps.why_not[q][0] == '\0' && caps.dir[q][0] == '/'
                       : strncmp(caps.why_not[q], "no writable cgroup: ", 20) == 0,
           "probe: %s has a place or a reason", qname[q]);
    for (int q = 0; q < A3S_QUOTA_COUNT; q++)
        ok(!caps.can[q] || !has_probe_child(caps.dir[q]), "probe: no probe child left in %s",
           qname[q]);

    if (caps.can[A3S_QUOTA_PIDS])
        test_pids(&caps);
    else
        printf("# skip pids effects: %s\n", caps.why_not[A3S_QUOTA_PIDS]);
    if (caps.can[A3S_QUOTA_MEMORY])
        test_memory(&caps);
    else
        printf("# skip memory effects: %s\n", caps.why_not[A3S_QUOTA_MEMORY]);
    if (caps.can[A3S_QUOTA_CPU])
        test_cpu(&caps);
    else
        printf("# skip cpu effects: %s\n", caps.why_not[A3S_QUOTA_CPU]);
    if (caps.can[0] && caps.can[1] && caps.can[2]) {
        test_all(&caps);
        test_partial(&caps);
    } else {
        printf("# skip combined and partial-failure tests: not every quota is enforceable\n");
    }
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* orphaned grandchildren of the pids test come back to us to be reaped */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    int fds0 = count_fds();
    test_arguments();
    test_fake_roots();
    test_readonly_bind();
    test_real();
    int fds1 = count_fds();
    ok(fds0 == fds1, "no descriptor leaked (%d before, %d after)", fds0, fds1);
    return tap_done();
}
