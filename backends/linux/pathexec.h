/* The launcher's exec of the command (launch.c): execvp as GNU libc does it, whichever C
 * library the launcher is linked with. musl's execvp gives up on a file without a "#!"
 * line (ENOEXEC); GNU's, like a shell, runs it with /bin/sh, and commands written for a
 * shell expect that. Internal to the launcher. */
#ifndef A3S_PATHEXEC_H
#define A3S_PATHEXEC_H

/* Room for the /bin/sh fallback's argv: argc + 2 pointers. Made before the command's
 * process exists (a3s_pathexec_run allocates nothing: it runs in a child that shares the
 * launcher's memory). NULL when out of memory. */
char **a3s_pathexec_shell_argv(char *const argv[]);

/* Executes argv[0] as execvp(3) does: a name with a slash as it is, else each directory of
 * PATH (of environ; "/bin:/usr/bin" without one) in turn; a file the kernel will not run
 * (ENOEXEC) with /bin/sh, through sh_argv. Returns only on failure, with errno: EACCES
 * when some candidate was not permitted and none ran, else the last error that ended the
 * search (ENOENT when nothing was found). */
void a3s_pathexec_run(char *const argv[], char **sh_argv);

#endif
