/* The caller's passwd home (engine/passwd.c): the line of `getent passwd UID` a static
 * program reads is taken only when it is that uid's, well-formed, with an absolute home;
 * a dynamic program (this test) asks getpwuid. TAP output. */
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "passwd.h"
#include "tap.h"

static int home_is(const char *entry, uid_t uid, const char *want)
{
    char *h = a3s_passwd_entry_home(entry, uid);
    int same = want ? h && !strcmp(h, want) : !h;
    free(h);
    return same;
}

int main(void)
{
    ok(home_is("root:x:0:0:root:/root:/bin/bash\n", 0, "/root"), "uid 0's line: its home");
    ok(home_is("dev:x:1003:1003:A Dev,,,:/home/dev:/bin/sh", 1003, "/home/dev"),
       "no newline, a gecos with commas");
    ok(home_is("root:x:0:0:root:/root:/bin/bash\n", 1, NULL), "another uid's line: nothing");
    ok(home_is("root:x:00:0:root:/root:/bin/bash\n", 0, NULL), "the uid spelled otherwise: nothing");
    ok(home_is("root:x:0:0:root:/root\n", 0, NULL), "six fields: nothing");
    ok(home_is("root:x:0:0:root:/root:/bin/bash:more\n", 0, NULL), "eight fields: nothing");
    ok(home_is("u:x:7:7::home/u:/bin/sh\n", 7, NULL), "a relative home: nothing");
    ok(home_is("u:x:7:7:::/bin/sh\n", 7, NULL), "an empty home: nothing");
    ok(home_is("", 0, NULL) && home_is("\n", 0, NULL), "no output: nothing");
    ok(home_is("a:x:5:5::/a:/bin/sh\nb:x:6:6::/b:/bin/sh\n", 6, NULL),
       "only the first line counts");

    /* This test is dynamically linked: the answer is getpwuid's. */
    struct passwd *pw = getpwuid(getuid());
    char *h = NULL;
    a3s_error err = {0};
    int rc = a3s_passwd_home(getuid(), &h, &err);
    ok(rc == 0 && (pw && pw->pw_dir[0] == '/' ? h && !strcmp(h, pw->pw_dir) : !h),
       "a dynamic program: getpwuid's home (%s)", h ? h : "none");
    free(h);
    ok(a3s_passwd_home(4000000123u, &h, &err) == 0 && !h, "a uid with no entry: none, no error");
    return tap_done();
}
