/* A fresh run's sandbox started ahead (backend.h run_ahead): while the engine evaluates
 * the policy, scans the workspace and pins it, bubblewrap already makes the namespaces,
 * the read-only host view, /dev and /proc, and starts the launcher warm (warm.h). When
 * the run executes, its descriptors, setup records, argv and environment are handed to
 * that launcher, which goes on exactly as one bubblewrap started for it; nothing of the
 * command runs before. It is started for the boundary most runs get (no network, no
 * relay, no quota cgroup, no terminal) with the identity the run will have; a run that
 * needs another, or never executes, discards it (killed, reaped) and starts its own.
 * Internal to the linux-bwrap backend. */
#ifndef A3S_AHEAD_H
#define A3S_AHEAD_H

#include <stdbool.h>

#include "a3s_sandbox.h"
#include "util.h"
#include "warm.h"

typedef struct a3s_ahead_spec {
    const char *bwrap;    /* bubblewrap, absolute */
    int launcher_img;     /* the launcher's sealed image (consumed) */
    int userns;           /* mapped identity: the sandbox's user namespace (consumed), or -1 */
    const char *tag;      /* the run's tag (stale.h), or NULL */
    const char *cwd;      /* where bubblewrap starts (the workspace) */
} a3s_ahead_spec;

/* Start it into *w (its status pipe in w->status). -1 with err: none was started (the
 * fds are closed all the same). */
int a3s_ahead_start(a3s_warm *w, const a3s_ahead_spec *s, a3s_error *err);

/* Whether bubblewrap's options for a run (a3s_bwrap_build_args) are those the sandbox was
 * started ahead with, but for the environment (--setenv), which its launcher gets with
 * the command: no option the plan added (network kept, a path below /dev or /proc bound
 * first, a relay's reaper) is missing from it. */
bool a3s_ahead_args_fit(const a3s_strv *args, bool mapped);

#endif
