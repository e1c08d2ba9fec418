/* The policy digest kept between processes. Its evaluation cannot depend on the host (it
 * runs against a neutral one), only on the policy: its text, the files it looked for on
 * the search path (their contents, or that they were absent), and this build. So a later
 * run of the same policy takes the digest and its broadening roots from the entry a
 * first one stored, after checking, as the policy engine's own record says, that every
 * file looked for still is as it was; anything else is a miss and the policy is
 * evaluated. Entries live in the backend's cache directory (the caller's alone, never
 * writable by a command); one that is not exactly ours and well-formed is a miss. */
#ifndef A3S_DIGEST_CACHE_H
#define A3S_DIGEST_CACHE_H

#include "policy.h"
#include "sandbox_int.h"
#include "util.h"

/* 1: found and still true (digest and *broaden filled: broaden must be empty); 0: a miss,
 * nothing changed. ctx: the neutral evaluation's. */
int a3s_digest_cache_get(a3s_sandbox *sb, const a3s_policy_ctx *ctx, char digest[65],
                         a3s_strv *broaden);
/* Keep what an evaluation against ctx gave; failures only lose the entry. */
void a3s_digest_cache_put(a3s_sandbox *sb, const a3s_policy_ctx *ctx,
                          const a3s_policy_facts *facts, const char *digest,
                          const a3s_strv *broaden);

#endif
