/* Monotonic policy updates (replace_policy): field-by-field "is it broader?". */
#ifndef A3S_UPDATE_H
#define A3S_UPDATE_H

#include <stdbool.h>
#include <stddef.h>

#include "plan.h"

/* true when `next` grants anything `cur` does not: network; a new writable root or
 * read-only exposure; a removed hide/tmpfs/protect/mask rule; a removed protected name or
 * secret prefix; a new scan skip; more env kept or less stripped; any change of an env
 * value set; a removed syscall denial, a new socket family, a weaker seccomp switch; a
 * raised deadline/output/open-files/core limit. `why` gets the first broadening found
 * ("adds writable root /x"). Discovered (host-derived) entries count like any other, so
 * evaluate both plans against the same context (their host-derived rules then agree). */
bool a3s_plan_broadens(const a3s_plan *cur, const a3s_plan *next, char *why, size_t n);

#endif
