#include "runres.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rmtree.h"

/* Remove the scratch dir (a name in the directory open as tmp_fd). An empty one (a run
 * refused early) goes without any new fd, so even a run that failed for want of fds
 * cleans up. Returns whether it is gone. */
static bool remove_scratch(int tmp_fd, const char *scratch)
{
    if (!scratch)
        return true;
    const char *base = strrchr(scratch, '/') + 1;
    struct stat st;
    if (unlinkat(tmp_fd, base, AT_REMOVEDIR) == 0 || errno == ENOENT)
        return true;
    return a3s_rmtree_at(tmp_fd, base) == 0 ||
           (fstatat(tmp_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT);
}

/* The scratch directory: its name is recorded in the run record before it is made, so
 * that an owner killed at any point leaves nothing the next sweep does not find. */
static char *make_scratch(const char *tmp, int tmp_fd, a3s_run_rec *rec, a3s_error *err)
{
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    for (int tries = 0; tries < 8; tries++) {
        unsigned char rnd[12];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
            a3s_fail_errno(err, A3S_ERR_SETUP, errno, "scratch: getrandom");
            return NULL;
        }
        char name[sizeof "a3s-sandbox-" + sizeof rnd];
        memcpy(name, "a3s-sandbox-", sizeof "a3s-sandbox-" - 1);
        for (size_t i = 0; i < sizeof rnd; i++)
            name[sizeof "a3s-sandbox-" - 1 + i] = alnum[rnd[i] % (sizeof alnum - 1)];
        name[sizeof name - 1] = '\0';
        char *path = NULL;
        if (asprintf(&path, "%s/%s", tmp, name) < 0) {
            a3s_fail(err, A3S_ERR_INTERNAL, "scratch: out of memory");
            return NULL;
        }
        off_t mark = a3s_stale_run_mark(rec);
        if (a3s_stale_run_note(rec, "scratch", path, err) < 0) {
            free(path);
            return NULL;
        }
        if (mkdirat(tmp_fd, strrchr(path, '/') + 1, 0700) == 0)
            return path;
        int e = errno;
        a3s_stale_run_undo(rec, mark); /* not made: not ours to remove */
        free(path);
        if (e != EEXIST) {
            a3s_fail_errno(err, A3S_ERR_SETUP, e, "cannot create the scratch directory in %s",
                           tmp);
            return NULL;
        }
    }
    a3s_fail(err, A3S_ERR_SETUP, "cannot create the scratch directory in %s: names taken",
             tmp);
    return NULL;
}

/* One record read for all of a scan's top-level names (a3s_pins_view). */
static bool pin_held(void *ud, int wsfd, const char *name)
{
    a3s_runres *r = ud;
    return a3s_pins_view_held(&r->pview, wsfd, r->state_root, name);
}

static void pin_done(void *ud)
{
    a3s_pins_view_close(&((a3s_runres *)ud)->pview);
}

int a3s_runres_open(a3s_runres *r, const char *tmp, bool sweep, a3s_error *err)
{
    memset(r, 0, sizeof *r);
    r->tmp_fd = r->scratch_fd = -1;
    r->state_root = a3s_stale_root(tmp);
    r->pview = (a3s_pins_view)A3S_PINS_VIEW_INIT;
    r->hooks = (a3s_scan_hooks){.held = pin_held, .done = pin_done, .ud = r};
    /* Best effort: clean up after executions that were killed (pins, scratch dirs). */
    if (sweep) {
        a3s_pins_sweep(r->state_root);
        a3s_stale_sweep(r->state_root);
    }
    if ((r->tmp_fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return a3s_fail_errno(err, A3S_ERR_SETUP, errno, "cannot open the temp dir %s", tmp);
    if (a3s_stale_run_open(r->state_root, &r->rec, err) < 0 ||
        !(r->scratch = make_scratch(tmp, r->tmp_fd, r->rec, err)))
        goto fail;
    /* The scratch dir as created: its identity is checked again inside. */
    r->scratch_fd = open(r->scratch, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (r->scratch_fd < 0 || fstat(r->scratch_fd, &r->scratch_st) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "scratch directory %s", r->scratch);
        goto fail;
    }
    return 0;
fail:
    a3s_runres_close(r);
    return -1;
}

static int more_push(a3s_runres *r, const a3s_fs_rule *src, a3s_error *err)
{
    a3s_fs_rule c = {.kind = src->kind, .optional = src->optional,
                     .discovered = src->discovered, .prov.line = src->prov.line};
    if (!(c.path = a3s_strdup(src->path)) ||
        (src->prov.file && !(c.prov.file = a3s_strdup(src->prov.file)))) {
        free(c.path);
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    }
    r->more[r->nmore++] = c;
    return 0;
}

int a3s_runres_pin(a3s_runres *r, int ws_fd, const char *workspace, const a3s_scan_result *scan,
                   bool pin, a3s_error *err)
{
    if (pin && a3s_pins_acquire_in(r->state_root, ws_fd, workspace, &scan->missing_dirs,
                                   &scan->missing_files, &r->pins, err) < 0)
        return -1;
    char *const *pins = pin ? a3s_pins_paths(r->pins) : NULL;
    size_t npins = 0;
    while (pins && pins[npins])
        npins++;
    if (!(r->more = calloc(scan->nrules + npins + 1, sizeof *r->more)))
        return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
    for (size_t i = 0; i < scan->nrules; i++)
        if (more_push(r, &scan->rules[i], err) < 0)
            return -1;
    /* A pin is bound read-only like any protected name that exists. */
    for (size_t i = 0; i < npins; i++) {
        a3s_fs_rule p = {.kind = A3S_FS_PROTECT, .path = pins[i], .discovered = true};
        if (more_push(r, &p, err) < 0)
            return -1;
    }
    return 0;
}

static int record_cgroup(void *ud, const char *path, a3s_error *err)
{
    return a3s_stale_run_note(ud, "cgroup", path, err);
}

const a3s_quota_caps *a3s_linux_quota_caps(a3s_linux_quota *q)
{
    if (!q->probed) {
        a3s_cgroup_probe(q->root, &q->caps);
        for (int i = 0; i < A3S_QUOTA_COUNT; i++) {
            q->pub.can[i] = q->caps.can[i];
            memcpy(q->pub.via[i], q->caps.via[i], sizeof q->pub.via[i]);
            memcpy(q->pub.why_not[i], q->caps.why_not[i], sizeof q->pub.why_not[i]);
        }
        q->probed = true;
    }
    return &q->pub;
}

int a3s_runres_quota(a3s_runres *r, a3s_linux_quota *q, const a3s_plan *p, const char *id,
                     a3s_launch *l, bool *refused, a3s_error *err)
{
    *refused = false;
    a3s_cgroup_limits cl = {p->limits.processes, p->limits.memory_bytes,
                            p->limits.cpu_millicores};
    if (!cl.pids && !cl.memory_bytes && !cl.cpu_millicores)
        return 0;
    /* The whole tree joins its cgroup before the first program runs; a quota this host
     * cannot enforce refuses the run (fail closed). */
    (void)a3s_linux_quota_caps(q); /* probed once, before the first quota */
    if (a3s_cgroup_create_noted(&q->caps, &cl, id, record_cgroup, r->rec, &r->cg, err) < 0) {
        *refused = true;
        return -1;
    }
    l->ncgroup_fds = a3s_cgroup_join_fds(r->cg, l->cgroup_fds, 4);
    return 0;
}

void a3s_runres_quota_end(a3s_runres *r, a3s_outcome *o)
{
    if (!r->cg)
        return;
    if (o) {
        a3s_cgroup_events ev = {0};
        a3s_cgroup_events_read(r->cg, &ev);
        o->oom_kills = ev.oom_kills;
        o->pids_max = ev.pids_max;
    }
    if (a3s_cgroup_destroy(r->cg) < 0)
        r->leftover = true; /* the tree is gone; the directory is left for the sweep */
    r->cg = NULL;
}

void a3s_runres_record_pid(void *ud, pid_t pid)
{
    (void)a3s_stale_run_proc(ud, pid, NULL);
}

void a3s_runres_settle(a3s_runres *r)
{
    a3s_runres_quota_end(r, NULL);
    a3s_pins_view_close(&r->pview); /* a scan cut short */
    a3s_pins_release(r->pins);
    r->pins = NULL;
}

void a3s_runres_close(a3s_runres *r)
{
    a3s_runres_settle(r);
    if (r->scratch_fd >= 0)
        close(r->scratch_fd);
    r->scratch_fd = -1;
    for (size_t i = 0; i < r->nmore; i++) {
        free(r->more[i].path);
        free(r->more[i].prov.file);
    }
    free(r->more);
    r->more = NULL;
    r->nmore = 0;
    if (r->scratch && !remove_scratch(r->tmp_fd, r->scratch))
        r->leftover = true;
    free(r->scratch);
    r->scratch = NULL;
    if (r->tmp_fd >= 0)
        close(r->tmp_fd);
    r->tmp_fd = -1;
    /* Last: everything it lists is gone now (or left for the sweep). */
    a3s_stale_run_close(r->rec, !r->leftover);
    r->rec = NULL;
}
