/* The host resources of one run on Linux, shared by the linux-bwrap and process-host
 * backends: the run record (stale.h), the scratch dir (its name recorded before it is
 * made), the workspace pins, the quota cgroups. Everything is recorded before it is
 * created and released on every path (a3s_runres_close). */
#ifndef A3S_RUNRES_H
#define A3S_RUNRES_H

#include <stdbool.h>
#include <sys/stat.h>

#include "a3s_sandbox.h"
#include "backend.h"
#include "cgroup.h"
#include "exec.h"
#include "pin.h"
#include "plan.h"
#include "scan.h"
#include "stale.h"
#include "util.h"

/* The quota capabilities of this host, probed once (it creates and removes a probe
 * cgroup in each candidate place). */
typedef struct a3s_linux_quota {
    char *root; /* $A3S_SANDBOX_CGROUP_ROOT (tests), or NULL: /sys/fs/cgroup */
    a3s_cgroup_caps caps;
    a3s_quota_caps pub;
    bool probed;
} a3s_linux_quota;

/* What this host can enforce (probed on the first call). */
const a3s_quota_caps *a3s_linux_quota_caps(a3s_linux_quota *q);

typedef struct a3s_runres {
    const char *state_root; /* a3s_stale_root(tmp) */
    a3s_run_rec *rec;
    bool leftover; /* something could not be removed: the record stays for a sweep */
    int tmp_fd;    /* the directory holding the scratch dir: removal needs no new fd */
    char *scratch;
    int scratch_fd;
    struct stat scratch_st;
    a3s_scan_hooks hooks; /* the scan's "is this name a pin" question */
    a3s_pins_view pview;  /* its answers while the scan asks (closed by its done hook) */
    a3s_pins *pins;
    /* Rules applied with the plan's: the scan's, then one PROTECT per pin. */
    a3s_fs_rule *more;
    size_t nmore;
    a3s_cgroup *cg;
} a3s_runres;

/* Sweep what dead runs left (sweep), open the run record, record and make the scratch dir in
 * tmp. On failure everything made so far is released. */
int a3s_runres_open(a3s_runres *r, const char *tmp, bool sweep, a3s_error *err);
/* Pin the scan's missing protected names (pin: else none) and make `more` from the
 * scan's rules and the pins. */
int a3s_runres_pin(a3s_runres *r, int ws_fd, const char *workspace, const a3s_scan_result *scan,
                   bool pin, a3s_error *err);
/* The plan's quotas: a cgroup the launched process joins (fds into l). The host is
 * probed only when the plan asks for a quota. A quota this host cannot enforce refuses
 * the run: -1, *refused. */
int a3s_runres_quota(a3s_runres *r, a3s_linux_quota *q, const a3s_plan *p, const char *id,
                     a3s_launch *l, bool *refused, a3s_error *err);
/* After the tree is gone: the quota events into o, the cgroup removed. */
void a3s_runres_quota_end(a3s_runres *r, a3s_outcome *o);
/* Each process of the launch into the run record, as soon as its pid is known. */
void a3s_runres_record_pid(void *ud, pid_t pid);
/* Release what the workspace and the host keep of it but the scratch dir and the record:
 * the quota cgroup, the pins (the workspace root's mode and ACLs restored by the last
 * holder). a3s_runres_close does it too when it was not done. */
void a3s_runres_settle(a3s_runres *r);
/* Release everything; the record goes last (kept for a sweep when something is left). */
void a3s_runres_close(a3s_runres *r);

#endif
