/* The order of a session's commands when a client goes away (session.c).
 *
 * A command whose client was killed is cancelled by its worker: the tree is killed and
 * the worker waits until the command's pid namespace is empty, which takes as long as
 * the kernel needs to tear the processes down (their memory first, then their files and
 * locks). The caller, which saw its client die, may send its next command meanwhile: it
 * must not start while that tree is still there. So every worker registers its running
 * command in a table that all of the session's processes share (an anonymous shared
 * mapping the supervisor makes before any worker), with its client's pid and start time;
 * a command starts only once no other registered command has a client that is gone. A
 * command whose client is still there is a concurrent one, which sessions allow. */
#ifndef A3S_CLI_SESSION_GATE_H
#define A3S_CLI_SESSION_GATE_H

#include <stddef.h>
#include <sys/types.h>

typedef struct cli_gate cli_gate;

/* The supervisor's table for n workers at once; NULL (errno) on failure. */
cli_gate *cli_gate_new(size_t n);
/* A worker, before its command: waits while another registered command's client is gone,
 * then registers this one (conn: the connection to its client). -1 when its own client
 * is gone already (nothing to run) or the table is full. */
int cli_gate_enter(cli_gate *g, int conn);
/* A worker, once its command's tree is gone. */
void cli_gate_leave(cli_gate *g);
/* The supervisor, once it has reaped a worker (one that died while registered). */
void cli_gate_forget(cli_gate *g, pid_t worker);

#endif
