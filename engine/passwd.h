/* The caller's passwd entry: its home directory (passwd.c). */
#ifndef A3S_PASSWD_H
#define A3S_PASSWD_H

#include <sys/types.h>

#include "a3s_sandbox.h"

/* The home directory of uid's passwd entry: *home is an absolute path (malloc'd), or NULL
 * when there is no entry or its home is not absolute; 0. -1 with err (A3S_ERR_SETUP)
 * when the entry could not be looked up: the caller refuses (a home that is not known
 * cannot be refused as a workspace).
 *
 * A dynamically linked program asks getpwuid. A statically linked one (the CLI built as a
 * static PIE) does not load the system's name-service modules into itself (some crash
 * there, libnss_systemd among them): when the name-service configuration asks the files
 * source first and /etc/passwd has a regular entry for uid, that entry answers, as
 * getpwuid's would; otherwise `getent passwd UID`, the C library's own dynamically
 * linked program, does the whole lookup, within a time limit. Nothing is remembered
 * between calls (a session asks again before each command). */
int a3s_passwd_home(uid_t uid, char **home, a3s_error *err);

/* The home directory in entry's first line ("name:password:uid:gid:gecos:home:shell",
 * as getent prints it) when it is uid's entry and the home is absolute; else NULL. */
char *a3s_passwd_entry_home(const char *entry, uid_t uid);

#endif
