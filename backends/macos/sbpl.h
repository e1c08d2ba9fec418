/* The macOS Seatbelt profile (SBPL, what `sandbox-exec -p` reads) of a frozen plan and
 * the workspace scan's facts: a pure function of its input, no I/O, so that what macOS
 * enforces can be pinned and checked on any host (backends/macos/README.md). */
#ifndef A3S_SBPL_H
#define A3S_SBPL_H

#include "a3s_sandbox.h"
#include "plan.h"
#include "scan.h"

typedef struct a3s_sbpl_input {
    const a3s_plan *plan;        /* validated, frozen */
    const a3s_scan_result *scan; /* the scan's rules beside the plan, or NULL: none */
    const char *workspace;       /* canonical, as the plan's roots */
    const char *scratch;
} a3s_sbpl_input;

/* What SBPL as generated here cannot enforce of a plan, refused before anything of a run
 * is made: a writable root outside the workspace and the scratch dir (a broadening), or a
 * network mode other than none. 0, or -1 with err (A3S_ERR_POLICY, naming the rule). */
int a3s_sbpl_check(const a3s_plan *p, a3s_error *err);

/* The profile text (malloc'd, *out) for in: deny by default; process fork/exec and
 * signals within the sandbox; sysctl reads and two mach services; the host root readable;
 * the plan's rules shallowest path first (in SBPL the last matching rule wins, so a
 * deeper rule overrides a shallower one, as a later mount does); the protected names in
 * every case spelling; secrets and masks after everything; no network at all.
 * 0, or -1 with err (what a3s_sbpl_check refuses; A3S_ERR_INTERNAL out of memory). */
int a3s_sbpl_profile(const a3s_sbpl_input *in, char **out, a3s_error *err);

#endif
