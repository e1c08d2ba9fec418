/* The seccomp filter, compiled with libseccomp in the parent and exported as BPF. */
#ifndef A3S_A3S_SECCOMP_H
#define A3S_A3S_SECCOMP_H

#include <stdbool.h>

#include "a3s_sandbox.h"
#include "plan.h"

/* Invariants applied whatever the plan says: a foreign architecture kills the process;
 * on x86_64 x32 syscall numbers kill the process; no set-uid/set-gid file can be created
 * (S_ISUID/S_ISGID in a chmod, mkdir, mknod or creating-open mode -> EPERM, openat2 ->
 * ENOSYS); everything not denied is allowed. */

/* Build the filter and export it into a memfd (CLOEXEC, sealed, offset 0) for bwrap's
 * --seccomp FD. Returns the fd or -1 with err (A3S_ERR_SETUP). */
int a3s_seccomp_export(const a3s_seccomp_plan *sp, a3s_error *err);
/* Build and load the filter into the calling process (tests, process-host). */
int a3s_seccomp_load(const a3s_seccomp_plan *sp, a3s_error *err);
/* true when libseccomp knows the syscall name on the native architecture */
bool a3s_seccomp_syscall_known(const char *name);
/* JSON array text describing every rule the filter contains, invariants included
 * (malloc'd; NULL on ENOMEM). */
char *a3s_seccomp_describe_json(const a3s_seccomp_plan *sp);

#endif
