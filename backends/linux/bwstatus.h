/* bubblewrap's --json-status-fd, as the supervisor reads it (exec.c): the sandbox's
 * first process ("child-pid", recorded through the launch's on_pid and opened as a
 * pidfd while it is still bwrap's child) and bwrap's own report of the exit code. */
#ifndef A3S_BWSTATUS_H
#define A3S_BWSTATUS_H

#include <stddef.h>
#include <sys/types.h>

#include "exec.h"

/* Parse the complete lines in buf[0..*len); an incomplete last line stays for the next
 * read. top: bwrap's pid; *ns_pidfd (-1 until then): the pidfd of the sandbox's first
 * process once reported, the caller's to close. */
void a3s_bwstatus_parse(const a3s_launch *l, char *buf, size_t *len, a3s_outcome *o,
                        pid_t top, int *ns_pidfd);

#endif
