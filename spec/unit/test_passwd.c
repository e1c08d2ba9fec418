/* The caller's passwd home (engine/passwd.c): getpwuid's answer, none for a uid with no
 * entry, and no error then. TAP output. */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passwd.h"
#include "tap.h"

int main(void)
{
    struct passwd *pw = getpwuid(getuid());
    char *h = NULL;
    a3s_error err = {0};
    int rc = a3s_passwd_home(getuid(), &h, &err);
    ok(rc == 0 && (pw && pw->pw_dir[0] == '/' ? h && !strcmp(h, pw->pw_dir) : !h),
       "the caller's home is getpwuid's (%s)", h ? h : "none");
    free(h);
    h = NULL;
    ok(a3s_passwd_home(4000000123u, &h, &err) == 0 && !h, "a uid with no entry: none, no error");
    return tap_done();
}
