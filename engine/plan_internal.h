/* Shared by the files of the plan module (engine/plan*.c) only; callers use plan.h. */
#ifndef A3S_PLAN_INTERNAL_H
#define A3S_PLAN_INTERNAL_H

#include <stdio.h>

#include <jansson.h>

#include "plan.h"

/* "file:line", "file" (line <= 0, e.g. "<scan>") or "<engine>". */
static inline const char *prov_str(const a3s_prov *pv, char *buf, size_t n)
{
    if (!pv->file)
        return "<engine>";
    if (pv->line > 0)
        snprintf(buf, n, "%s:%d", pv->file, pv->line);
    else
        snprintf(buf, n, "%s", pv->file);
    return buf;
}

/* The two JSON forms of a plan (engine/plan_encode.c describes both). */
enum a3s_plan_form {
    A3S_PLAN_CANONICAL, /* the declarations, host-independent: the digest's input */
    A3S_PLAN_FULL,      /* everything, with provenance and labels, host text as it is */
};

/* The plan as a JSON object in `form`; in the full form, the nmore rules of `more` are
 * listed after the plan's own fs rules (a3s_plan_json). NULL on ENOMEM, a NULL plan, or
 * `more` rules asked of the canonical form. */
json_t *a3s_plan_encode(const a3s_plan *p, enum a3s_plan_form form, const a3s_fs_rule *more,
                        size_t nmore);

#endif
