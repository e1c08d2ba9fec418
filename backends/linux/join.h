/* Sessions, the launcher's side: handing a session's namespaces to its owner (--hold)
 * and entering them for one command (--join). Part of the in-sandbox launcher, never of
 * the library (join.c, protocol.h). */
#ifndef A3S_JOIN_H
#define A3S_JOIN_H

#include <stdbool.h>

/* Make this view private and harden it (no mount below the workspace ws, when given),
 * then send this process's user, mount, UTS (and with_net: network) namespaces over
 * A3S_FD_HOLD. -1 with a message on stderr. */
int a3s_join_hold(bool with_net, const char *ws);

/* Enter the session's namespaces (A3S_FD_NS_*), make the command's own, and return in
 * the child that is pid 1 there (this process waits and exits with its status). -1 with
 * a message on stderr: the command must not run. */
int a3s_join_enter(void);

/* A warm launcher, in the child a3s_join_enter returned in: say "R" on A3S_FD_WARM, wait
 * for the command (protocol.h), put its descriptors at their numbers, take its
 * environment and return its launcher argv in *argv (argc in *argc). -1 with a message on
 * stderr: the command must not run. */
int a3s_join_warm(int *argc, char ***argv);

#endif
