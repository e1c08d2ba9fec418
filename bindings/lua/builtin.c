#include "builtin.h"

#include <string.h>

int a3s_builtin_is(const char *path)
{
    size_t n = sizeof A3S_BUILTIN_DIR - 1;
    return path && strncmp(path, A3S_BUILTIN_DIR, n) == 0 && path[n] == '/';
}

const a3s_builtin_file *a3s_builtin_find(const char *path)
{
    if (!a3s_builtin_is(path))
        return NULL;
    const char *rel = path + sizeof A3S_BUILTIN_DIR;
    for (const a3s_builtin_file *f = a3s_builtin_files; f->name; f++)
        if (strcmp(f->name, rel) == 0)
            return f;
    return NULL;
}
