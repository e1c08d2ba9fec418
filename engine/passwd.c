/* The caller's passwd entry (passwd.h). */
#include "passwd.h"

#include <errno.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

int a3s_passwd_home(uid_t uid, char **home, a3s_error *err)
{
    *home = NULL;
    struct passwd pw, *res = NULL;
    char *buf = NULL;
    int e = ERANGE;
    for (size_t size = 16384; e == ERANGE && size <= (64u << 20); size *= 4) {
        free(buf);
        if (!(buf = malloc(size)))
            return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
        e = getpwuid_r(uid, &pw, buf, size, &res);
    }
    /* No entry is 0 and no result; a source that is down (a directory service) is an
     * error, not "no entry" (getpwuid_r(3) lists ENOENT, ESRCH, EBADF and EPERM as "not
     * found" spellings of some systems: taken as such). */
    if (e != 0 && e != ENOENT && e != ESRCH && e != EBADF && e != EPERM) {
        free(buf);
        return a3s_fail(err, A3S_ERR_SETUP, "cannot look up the passwd entry of uid %u: %s",
                        (unsigned)uid, strerror(e));
    }
    bool absolute = e == 0 && res && res->pw_dir && res->pw_dir[0] == '/';
    *home = absolute ? a3s_strdup(res->pw_dir) : NULL;
    free(buf);
    return absolute && !*home ? a3s_fail(err, A3S_ERR_INTERNAL, "out of memory") : 0;
}
