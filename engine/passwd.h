/* The caller's passwd entry: its home directory (passwd.c). */
#ifndef A3S_PASSWD_H
#define A3S_PASSWD_H

#include <sys/types.h>

/* The home directory of uid's passwd entry (an absolute path, malloc'd), or NULL when it
 * has none that is absolute, or there is no entry. In a dynamically linked program this
 * is getpwuid's answer. A statically linked one (the CLI built as a static PIE) does not
 * load the system's name-service modules into itself (some crash there, libnss_systemd
 * among them): it reads /etc/passwd, and only for a uid not found there asks
 * `getent passwd UID`, a dynamically linked program of the C library that does the full
 * lookup. */
char *a3s_passwd_home(uid_t uid);

/* The home directory in entry's first line ("name:password:uid:gid:gecos:home:shell",
 * as getent prints it) when it is uid's entry and the home is absolute; else NULL. */
char *a3s_passwd_entry_home(const char *entry, uid_t uid);

#endif
