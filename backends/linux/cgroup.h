/* Resource quotas with cgroups: a per-execution cgroup that the launched process joins
 * before it execs bwrap (so the whole tree is inside from its first instruction), limits
 * written before that, events read after, the directory removed with rmdir once the
 * tree is gone.
 *
 * Where: cgroup v2 when the caller's own cgroup (from /proc/self/cgroup, "0::") is a
 * writable, delegated subtree with the needed controllers; else cgroup v1 `pids`,
 * `memory` (and `cpu`) hierarchies, each below the caller's own cgroup in that hierarchy,
 * when writable; else the quota is not enforceable and an execution that asks for it is
 * refused (fail closed). */
#ifndef A3S_CGROUP_H
#define A3S_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "a3s_sandbox.h"
#include "backend.h" /* enum a3s_quota */


/* What this host can enforce, from a runtime probe (a child cgroup is created and
 * removed in each candidate place). */
typedef struct a3s_cgroup_caps {
    bool can[A3S_QUOTA_COUNT];     /* enforceable */
    char via[A3S_QUOTA_COUNT][64]; /* "cgroup v2", "cgroup v1 pids", ... */
    char why_not[A3S_QUOTA_COUNT][256];
    /* internal: the parent directory to create per-execution cgroups in */
    char dir[A3S_QUOTA_COUNT][4096];
    bool v2;
} a3s_cgroup_caps;

/* Probe. `root` is the cgroup filesystem root (NULL: /sys/fs/cgroup; tests point it at
 * other directories, e.g. a read-only one, to prove the fail-closed path). Never fails:
 * what cannot be used is reported in why_not. */
void a3s_cgroup_probe(const char *root, a3s_cgroup_caps *caps);

typedef struct a3s_cgroup_limits {
    int64_t pids;           /* 0: none */
    int64_t memory_bytes;   /* 0: none; swap is limited to 0 too where possible */
    int64_t cpu_millicores; /* 0: none; 1000 = one CPU */
} a3s_cgroup_limits;

typedef struct a3s_cgroup a3s_cgroup;

/* Create the per-execution cgroup(s) for the requested limits (name includes `id`) and
 * write the limits. A requested limit that caps cannot enforce is an error
 * (A3S_ERR_SETUP, naming the quota and why_not); nothing is left behind on failure.
 * No limit requested: *out = NULL and 0. */
int a3s_cgroup_create(const a3s_cgroup_caps *caps, const a3s_cgroup_limits *lim,
                      const char *id, a3s_cgroup **out, a3s_error *err);

/* a3s_cgroup_create, calling note(ud, path, err) before each directory is made (to
 * record it, see stale.h); a note that fails (-1, err filled) fails the create. */
typedef int (*a3s_cgroup_note_fn)(void *ud, const char *path, a3s_error *err);
int a3s_cgroup_create_noted(const a3s_cgroup_caps *caps, const a3s_cgroup_limits *lim,
                            const char *id, a3s_cgroup_note_fn note, void *note_ud,
                            a3s_cgroup **out, a3s_error *err);

/* A dead run's cgroup directory (absolute path of one a3s_cgroup_create made): kill what
 * is inside, wait a bounded time for it to empty, rmdir. Returns 0 when it is gone (or
 * was never made, or is not such a directory), -1 when it is still there. */
int a3s_cgroup_sweep_dir(const char *path);

/* fds (O_WRONLY|O_CLOEXEC) of the cgroup.procs files to join: the launched child writes
 * "0" to each before exec. Returns how many (<= max). */
size_t a3s_cgroup_join_fds(const a3s_cgroup *cg, int *fds, size_t max);

typedef struct a3s_cgroup_events {
    uint64_t oom_kills; /* processes killed by the memory limit */
    uint64_t pids_max;  /* forks refused by the process limit */
} a3s_cgroup_events;

/* Read the events counted so far (best effort; zeros when unknown). */
void a3s_cgroup_events_read(const a3s_cgroup *cg, a3s_cgroup_events *ev);

/* Kill whatever is still inside (cgroup.kill on v2, SIGKILL to each pid on v1), wait a
 * bounded time for it to empty, rmdir every directory, free. NULL is a no-op. Returns 0,
 * or -1 if a directory could not be removed (it is then left for the next sweep). */
int a3s_cgroup_destroy(a3s_cgroup *cg);

#endif
