/* Shared by the two files of the cgroup module only: cgroup_probe.c (what this host can
 * enforce) and cgroup.c (the per-execution cgroups, and the safe access to cgroup files
 * that both use). Callers use cgroup.h. */
#ifndef A3S_CGROUP_INTERNAL_H
#define A3S_CGROUP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "a3s_sandbox.h"
#include "cgroup.h"
#include "util.h" /* A3S_PRINTF */

/* Every cgroup we make is named with it: per-execution ones CG_PREFIX "<id>", probe
 * children CG_PREFIX "probe-..." (which a sweep never removes). */
#define CG_PREFIX "a3s-sandbox-"

typedef struct quota_info {
    const char *name;    /* in messages */
    const char *ctrl;    /* controller */
    const char *v1_file; /* proves the v1 controller is attached to a new cgroup */
    const char *v2_file; /* same for v2 */
} quota_info;

extern const quota_info a3s_cg_quotas[A3S_QUOTA_COUNT];

/* Safe access to the cgroup filesystems (defined in cgroup.c). */

/* snprintf for messages that may be cut short on purpose (why_not has 256 bytes). */
void a3s_cg_msgf(char *buf, size_t sz, const char *fmt, ...) A3S_PRINTF(3, 4);
/* Clean, absolute, and without escapes or control characters. */
bool a3s_cg_path_safe(const char *p);
/* Open the directory at clean path `rel` below dfd ("/" is dfd itself, duplicated), one
 * component at a time without following any link. -1 with errno. */
int a3s_cg_open_below(int dfd, const char *rel);
/* Open a safe absolute directory path without following links. -1 with errno. */
int a3s_cg_open_dir_nofollow(const char *path);
/* Whether fd is on a filesystem of type `magic` (CGROUP_SUPER_MAGIC, CGROUP2_...). */
bool a3s_cg_fs_is(int fd, unsigned long magic);
/* Read a small file below dfd into buf, NUL-terminated: its length, or -1 with errno. */
ssize_t a3s_cg_read_small_at(int dfd, const char *name, char *buf, size_t sz);
/* Write s to the control file `name` below dfd in one write (cgroup files take one value
 * per write). 0, or -1 with errno. */
int a3s_cg_write_at(int dfd, const char *name, const char *s);

#endif
