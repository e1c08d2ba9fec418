/* Crash safety for what an execution leaves on the host: a per-user state directory that
 * records, outside any workspace, what each live execution owns (workspace pins, see
 * pin.h; scratch directories, here), so that a later run can remove what a run killed
 * with SIGKILL left behind. Liveness is an open-file-description lock held by the owner
 * for as long as it lives: the kernel drops it when the owner dies, however it dies, and
 * it cannot be confused with another process that reuses the pid. */
#ifndef A3S_STALE_H
#define A3S_STALE_H

#include <stdbool.h>
#include <sys/types.h>

#include "a3s_sandbox.h"
#include "util.h"

/* The directory holding the state directory: "/tmp" when it is a usable directory, so
 * that every run finds the same state whatever its TMPDIR (runs with different TMPDIRs
 * in one workspace must still see each other's pins); else tmp (the sandbox's host temp
 * dir), or "/tmp" when tmp is NULL. Returns "/tmp" or tmp itself. */
const char *a3s_stale_root(const char *tmp);

/* Open <root>/a3s-sandbox-state-<euid>, creating it (0700) when create. Refuses
 * (A3S_ERR_SETUP) a symbolic link, a non-directory, a directory owned by another user or
 * writable by group or others; then the same under a3s_stale_fallback_root() is tried.
 * Returns the directory fd (O_CLOEXEC); -2 when !create and it does not exist (err
 * untouched); -1 on failure with err filled (the first refusal). */
int a3s_stale_state_open(const char *root, bool create, a3s_error *err);

/* Where the state directory goes when the usual one is refused (another user created
 * it first): the caller's runtime directory, /run/user/<euid>, when it exists and is
 * the caller's alone. */
const char *a3s_stale_fallback_root(void);

/* OFD-lock [start, start+len) (len 0: to the end) of fd with type F_RDLCK, F_WRLCK or
 * F_UNLCK. When wait, a conflicting lock is waited for, but at most about 10 s (a holder
 * stopped with SIGSTOP must not hang every other run): then -1 with errno ETIMEDOUT.
 * Without wait, -1 with EAGAIN or EACCES when taken. */
int a3s_stale_lock(int fd, short type, off_t start, off_t len, bool wait);
/* Unlock all of fd, then close it. A child forked without exec shares the open file
 * description, and its locks: closing our fd alone would leave them held. */
void a3s_stale_lock_close(int fd);

/* A run record: a locked file in the state directory listing what one execution made on
 * the host, each line written *before* the object it names is made (paths) or right
 * after it exists (processes), so that whatever point the owner is killed at, the next
 * sweep finds everything: "scratch PATH", "cgroup PATH", "proc PID STARTTIME". */
typedef struct a3s_run_rec a3s_run_rec;
int a3s_stale_run_open(const char *root, a3s_run_rec **out, a3s_error *err);
/* Append "kind path" (path absolute, without a newline). NULL record: no-op. */
int a3s_stale_run_note(a3s_run_rec *r, const char *kind, const char *path, a3s_error *err);
/* Record a live process of the run (pid and start time): a sweep after the owner's death
 * kills exactly that process if it still exists. A process already gone is not recorded. */
int a3s_stale_run_proc(a3s_run_rec *r, pid_t pid, a3s_error *err);
/* The record's random tag (32 hex digits): put on the argv of the run's sandbox
 * processes, it lets a sweep find and kill the dead run's processes whose pids were
 * never recorded (killed before the pid was known). */
const char *a3s_stale_run_tag(const a3s_run_rec *r);
/* The record's length now, and dropping the lines noted since (for an object whose
 * creation failed before anything was made, e.g. a name that existed). */
off_t a3s_stale_run_mark(const a3s_run_rec *r);
void a3s_stale_run_undo(a3s_run_rec *r, off_t mark);
/* done: everything listed is gone, the record goes; else it is left (unlocked) for the
 * next sweep. NULL: no-op. */
void a3s_stale_run_close(a3s_run_rec *r, bool done);

/* Record that this process owns the scratch directory `scratch` (an absolute path whose
 * last component starts with "a3s-sandbox-") until a3s_stale_scratch_disown: a locked
 * owner file in the state directory under root. */
int a3s_stale_scratch_own(const char *root, const char *scratch, a3s_error *err);
/* Drop the ownership record of `scratch` (call after removing the directory). Unknown
 * paths and NULL are ignored. */
void a3s_stale_scratch_disown(const char *scratch);

/* Best effort: for every run record whose owner is dead, kill its recorded processes,
 * remove its cgroups and scratch directory, then the record. Never touches a directory of a live owner, of another user, or one without a
 * record. Reads only the state directory. */
void a3s_stale_sweep(const char *root);

/* Call fn(statefd, name, ud) for every entry of the state dir under root whose name
 * starts with prefix (best effort: nothing happens if the dir is absent). */
void a3s_stale_foreach(const char *root, const char *prefix,
                       void (*fn)(int statefd, const char *name, void *ud), void *ud);

#endif
