/* Shared fixtures of the plan's unit tests (test_plan*.c): builders that bail out on
 * failure, a baseline-like plan on two hosts, and a substring check. */
#ifndef A3S_PLAN_FIXTURE_H
#define A3S_PLAN_FIXTURE_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "util.h"

typedef struct roots {
    const char *ws, *scratch, *home, *tmp;
} host_roots;

/* Host A: workspace under HOME, scratch under /tmp (the common layout). */
static const host_roots HOST_A = {"/home/alice/proj", "/tmp/a3s-1234", "/home/alice", "/tmp"};
/* Host B: everything elsewhere. */
static const host_roots HOST_B = {"/srv/work/x", "/var/tmp/a3s-99", "/home/bob", "/var/tmp"};

static inline char *cat(const char *a, const char *b)
{
    char *s = NULL;
    if (asprintf(&s, "%s%s", a, b) < 0)
        abort();
    return s;
}

static inline void must(int rc, const a3s_error *e)
{
    if (rc != 0) {
        printf("Bail out! builder failed: %s\n", e->msg);
        exit(2);
    }
}

static inline void add_fs(a3s_plan *p, enum a3s_fs_kind k, const char *root, const char *rest,
                          bool optional, const char *file, int line)
{
    a3s_error e = {0};
    char *path = cat(root, rest);
    must(a3s_plan_add_fs(p, k, path, optional, false, file, line, &e), &e);
    free(path);
}

static inline void add_name(a3s_name_list *l, const char *name, const char *file, int line)
{
    a3s_error e = {0};
    must(a3s_plan_add_name(l, name, file, line, &e), &e);
}

/* A baseline-like plan whose host-specific paths come from `r`; `file` and `off` vary the
 * provenance only. */
static inline a3s_plan *base_plan(const host_roots *r, const char *file, int off)
{
    a3s_error e = {0};
    a3s_plan *p = a3s_plan_new();
    if (!p)
        abort();
    p->name = strdup("baseline");
    p->source = strdup(file);
    must(a3s_plan_set_roots(p, r->ws, r->scratch, r->home, r->tmp, &e), &e);

    add_fs(p, A3S_FS_HIDE, r->home, "", false, file, off + 1);
    add_fs(p, A3S_FS_HIDE, "/root", "", true, file, off + 2);
    add_fs(p, A3S_FS_HIDE, "/run", "", true, file, off + 3);
    add_fs(p, A3S_FS_MASK, "/etc/shadow", "", true, file, off + 4);
    add_fs(p, A3S_FS_RO, "/usr/bin", "", false, file, off + 5);
    add_fs(p, A3S_FS_RO, r->home, "/.cargo/bin", true, file, off + 6);
    add_fs(p, A3S_FS_MASK, r->home, "/.ssh", true, file, off + 7);
    add_fs(p, A3S_FS_RW, r->ws, "", false, file, off + 8);
    add_fs(p, A3S_FS_RW, r->scratch, "", false, file, off + 9);
    add_fs(p, A3S_FS_TMPFS, r->scratch, "/tmp", false, file, off + 10);
    add_fs(p, A3S_FS_PROTECT, r->ws, "/.git", true, file, off + 11);

    add_name(&p->protect_dirs, ".git", file, off + 20);
    add_name(&p->protect_dirs, ".a3s", file, off + 21);
    add_name(&p->protect_files, ".gitmodules", file, off + 22);
    add_name(&p->secret_prefixes, ".env", file, off + 23);
    add_name(&p->scan_skip, ".git", file, off + 24);
    add_name(&p->scan_skip, "node_modules", file, off + 25);

    add_name(&p->env.keep, "PATH", file, off + 30);
    add_name(&p->env.keep, "LANG", file, off + 31);
    add_name(&p->env.keep_prefix, "LC_", file, off + 32);
    add_name(&p->env.strip, "LD_PRELOAD", file, off + 33);
    add_name(&p->env.strip_prefix, "BASH_FUNC_", file, off + 34);
    char *v = cat(r->scratch, "/home");
    must(a3s_plan_env_set(p, "HOME", v, file, off + 35, &e), &e);
    free(v);
    v = cat(r->scratch, "/tmp");
    must(a3s_plan_env_set(p, "TMPDIR", v, file, off + 36, &e), &e);
    free(v);
    /* A PATH-like list: each element is encoded on its own. */
    char *list = NULL;
    if (asprintf(&list, "%s/bin:/usr/bin:%s/.cargo/bin", r->scratch, r->home) < 0)
        abort();
    must(a3s_plan_env_set(p, "A3S_TOOLPATH", list, file, off + 37, &e), &e);
    free(list);
    must(a3s_plan_env_set(p, "LANGUAGE", "C", file, off + 38, &e), &e);

    must(a3s_plan_seccomp_deny(p, "io_uring_setup", EPERM, file, off + 40, &e), &e);
    must(a3s_plan_seccomp_deny(p, "clone3", ENOSYS, file, off + 41, &e), &e);
    must(a3s_plan_seccomp_deny(p, "link", EPERM, file, off + 42, &e), &e);
    free(p->seccomp.prov.file);
    p->seccomp.prov.file = strdup(file);
    p->seccomp.prov.line = off + 43;
    free(p->limits.prov.file);
    p->limits.prov.file = strdup(file);
    p->limits.prov.line = off + 44;
    return p;
}

static inline bool contains(const char *hay, const char *needle)
{
    return hay && needle && strstr(hay, needle) != NULL;
}

/* A change to one thing of a plan (the digest and drift tests). */
typedef void (*mutation_fn)(a3s_plan *p);

#endif
