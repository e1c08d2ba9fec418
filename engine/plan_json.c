/* The full plan as pretty JSON: the full form (engine/plan_encode.c) with the rules the
 * caller enforces beside the plan, the plan's digest, and the members the caller adds. */
#include "plan.h"

#include <stdlib.h>

#include <jansson.h>

#include "json.h"
#include "plan_internal.h"

char *a3s_plan_json(const a3s_plan *p, const a3s_fs_rule *more, size_t nmore,
                    const char *extra_json)
{
    if (!p)
        return NULL;
    json_t *extra = NULL;
    if (extra_json) {
        /* The caller hands us its own JSON object; anything else is a bug on its side
         * and yields NULL rather than a dump silently missing those members. */
        extra = json_loads(extra_json, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(extra)) {
            json_decref(extra);
            return NULL;
        }
    }
    char digest[65];
    char *out = NULL;
    json_t *o = NULL;
    if (a3s_plan_digest(p, digest, NULL) < 0 ||
        !(o = a3s_plan_encode(p, A3S_PLAN_FULL, more, nmore)) ||
        a3s_json_set(o, "digest", json_string(digest)) < 0)
        goto out;
    if (extra && json_object_update(o, extra) < 0)
        goto out;
    out = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
out:
    json_decref(extra);
    json_decref(o);
    return out;
}
