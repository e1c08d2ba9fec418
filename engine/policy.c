#include "policy.h"

#include <stdlib.h>

void a3s_policy_src_free(a3s_policy_src *src)
{
    if (!src)
        return;
    free(src->name);
    free(src->path);
    free(src->text);
    src->name = src->path = src->text = NULL;
}
