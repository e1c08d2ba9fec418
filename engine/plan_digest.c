/* The canonical form of a plan as text, and its digest. What the canonical form holds
 * and how it writes host text is engine/plan_encode.c's (the walker of both forms). */
#include "plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <nettle/sha2.h>

#include "plan_internal.h"
#include "util.h"

/* Part of the encoding: changing these changes digests. */
#define CANON_FLAGS (JSON_SORT_KEYS | JSON_COMPACT | JSON_ENSURE_ASCII)

char *a3s_plan_canonical(const a3s_plan *p)
{
    json_t *o = a3s_plan_encode(p, A3S_PLAN_CANONICAL, NULL, 0);
    if (!o)
        return NULL;
    char *out = json_dumps(o, CANON_FLAGS);
    json_decref(o);
    return out;
}

void a3s_sha256_hex(const void *data, size_t len, char out[65])
{
    struct sha256_ctx ctx;
    uint8_t d[SHA256_DIGEST_SIZE];
    sha256_init(&ctx);
    sha256_update(&ctx, len, data);
    sha256_digest(&ctx, sizeof d, d);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof d; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

int a3s_plan_digest(const a3s_plan *p, char out[65], a3s_error *err)
{
    char *canon = a3s_plan_canonical(p);
    if (!canon)
        return a3s_fail(err, A3S_ERR_INTERNAL, "plan: cannot encode the canonical plan");
    a3s_sha256_hex(canon, strlen(canon), out);
    free(canon);
    return 0;
}
