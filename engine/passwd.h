/* The caller's passwd entry: its home directory (passwd.c). */
#ifndef A3S_PASSWD_H
#define A3S_PASSWD_H

#include <sys/types.h>

#include "a3s_sandbox.h"

/* The home directory of uid's passwd entry (getpwuid_r): *home is an absolute path
 * (malloc'd), or NULL when there is no entry or its home is not absolute; 0. -1 with
 * err (A3S_ERR_SETUP) when the name service could not answer: the caller refuses (a
 * home that is not known cannot be refused as a workspace). Asked anew at each call (a
 * session asks again before each command). */
int a3s_passwd_home(uid_t uid, char **home, a3s_error *err);

#endif
