/* How the running program was reached: the names its caller ran it by, which a
 * workspace guard protects (instdir.h; the session client a3s-sandbox-exec, which has
 * no policy directories of its own, uses this alone). */
#ifndef A3S_SELFPATH_H
#define A3S_SELFPATH_H

#include "util.h"

/* Append to out the main program as its caller named it: argv[0] from
 * /proc/self/cmdline; when it has no '/', every PATH candidate a shell or execvp would
 * try up to the one found (an earlier one a command creates would be what runs next):
 * an empty entry (also a trailing ':') is the current directory, a leading "~" or
 * "~user" is expanded as bash does (and kept literally too). 0, or -1 on ENOMEM. */
int a3s_selfpath_invoked(a3s_strv *out);

#endif
