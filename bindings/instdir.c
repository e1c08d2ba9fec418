/* The installation's policy directory, relative to the running image (instdir.h). An
 * install can be moved (cmake --install --prefix, LuaRocks trees), and neither a build
 * tree nor a source checkout is where an installed program may look. */
#include "instdir.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "policy_runtime.h"
#include "selfpath.h"
#include "util.h"

/* The path of the image that holds this code, and which kind of image it is. */
static char *image_path(const char **rel)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1((void *)a3s_instdir_policies, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return NULL;
    if (!lm->l_name || !lm->l_name[0]) {
        /* The main program (the CLI, or a unit test): its name in the link map is empty
         * and argv[0] is whatever its caller said. */
        *rel = A3S_POLICY_REL_BIN;
        return realpath("/proc/self/exe", NULL);
    }
    const char *base = strrchr(lm->l_name, '/');
    base = base ? base + 1 : lm->l_name;
    *rel = strcmp(base, "a3s_sandbox.so") == 0 ? A3S_POLICY_REL_LUA : A3S_POLICY_REL_LIB;
    return realpath(lm->l_name, NULL);
}

/* Every directory from path up to / belongs to root or owner, and none but a sticky one
 * is writable by others. */
static bool trusted_dirs(const char *path, uid_t owner)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return false;
    for (;;) {
        struct stat st;
        if (lstat(buf[0] ? buf : "/", &st) < 0 || !S_ISDIR(st.st_mode))
            return false;
        if (st.st_uid != 0 && st.st_uid != owner)
            return false;
        if ((st.st_mode & S_IWOTH) && !(st.st_mode & S_ISVTX))
            return false;
        char *slash = strrchr(buf, '/');
        if (!slash || !buf[0])
            return true;
        *slash = '\0';
    }
}

static char *candidate(const char *dir, const char *rel, uid_t owner)
{
    char *joined = NULL;
    if (asprintf(&joined, "%s/%s", dir, rel) < 0)
        return NULL;
    char *real = realpath(joined, NULL);
    free(joined);
    if (real && !trusted_dirs(real, owner)) {
        free(real);
        real = NULL;
    }
    return real;
}

char *a3s_instdir_policies(void)
{
    const char *rel = NULL;
    char *img = image_path(&rel);
    if (!img)
        return NULL;
    struct stat st;
    char *slash = strrchr(img, '/');
    if (stat(img, &st) < 0 || !slash) {
        free(img);
        return NULL;
    }
    *slash = '\0';
    const char *dir = img[0] ? img : "/";
    /* The build tree's layout first: a directory next to the image is as trusted as the
     * image itself; only then the install layout, which may lead out of it. */
    char *found = candidate(dir, "share/a3s-sandbox/policies", st.st_uid);
    if (!found)
        found = candidate(dir, rel, st.st_uid);
    free(img);
    return found;
}

char *a3s_instdir_image(void)
{
    const char *rel = NULL;
    return image_path(&rel);
}

int a3s_instdir_guard_paths(char **image, a3s_strv *files, a3s_strv *dirs)
{
    const char *rel = NULL;
    *image = image_path(&rel);
    /* The spelling that was loaded or run, which may pass through links. */
    Dl_info info;
    struct link_map *lm = NULL;
    if (dladdr1((void *)a3s_instdir_policies, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm) {
        if (lm->l_name && lm->l_name[0] ? a3s_strv_push(files, lm->l_name) < 0
                                         : a3s_selfpath_invoked(files) < 0)
            return -1;
    }
    if (!*image)
        return 0;
    if (a3s_strv_push(files, *image) < 0)
        return -1;
    /* Where a3s_instdir_policies looks, whether or not it exists yet. */
    char *dir = a3s_strdup(*image);
    if (!dir)
        return -1;
    *strrchr(dir, '/') = '\0';
    int rc = a3s_strv_pushf(dirs, "%s/share/a3s-sandbox/policies", dir) < 0 ||
                     a3s_strv_pushf(dirs, "%s/%s", dir, rel) < 0
                 ? -1
                 : 0;
    free(dir);
    return rc;
}

const char *a3s_instdir_builtin(void)
{
    return a3s_lua_policy_engine.builtin_dir;
}
