/* Shared by the files of the plan module (engine/plan*.c) only; callers use plan.h. */
#ifndef A3S_PLAN_INTERNAL_H
#define A3S_PLAN_INTERNAL_H

#include <stdio.h>

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

#endif
