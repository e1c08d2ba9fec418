/* The command's side of a pseudo-terminal the caller owns (a3s_exec_request.tty_fd). */
#ifndef A3S_PTYPEER_H
#define A3S_PTYPEER_H

#include "a3s_sandbox.h"

/* From the caller's pty master: *slave, the terminal the command gets as 0, 1, 2 (opened
 * from the master itself, O_NOCTTY, never by a path that could name another terminal),
 * and two CLOEXEC copies of the master for the supervisor, *rd (its output) and *wr
 * (typed input; the caller's open file description becomes non-blocking). Returns 0, or
 * -1 with err (A3S_ERR_INVALID: not a pty master) and nothing left open. */
int a3s_pty_open(int master, int *slave, int *rd, int *wr, a3s_error *err);

#endif
