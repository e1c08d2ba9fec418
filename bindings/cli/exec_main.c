/* a3s-sandbox-exec ID [-t S] [-e N=V]... [--json] [-v] (-- PROGRAM [ARG...] | -c CMD):
 * `a3s-sandbox session exec`, as a program of its own. A session's command is mostly the
 * client's own start: the a3s-sandbox command is a dynamically linked GNU libc program
 * with the Lua policy engine in it, and this one is the session client alone, linked
 * statically (against musl where it is installed), which starts several times faster.
 * The same client code (session_client.c), the same request, output and exit status. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "selfpath.h"

/* The paths this program is reached by, for the worker's workspace guard: the names it
 * was run by and its image (no policy directories: it reads no policy). */
static int guard_paths(char **image, a3s_strv *files, a3s_strv *dirs)
{
    (void)dirs;
    *image = realpath("/proc/self/exe", NULL);
    if (a3s_selfpath_invoked(files) < 0)
        return -1;
    return *image && a3s_strv_push(files, *image) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
    /* A reader of a refusal that went away is an error (125), not a death by SIGPIPE,
     * as for the a3s-sandbox program. */
    signal(SIGPIPE, SIG_IGN);
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        static const char usage[] =
            "usage: a3s-sandbox-exec ID [-t S] [-e N=V]... [--json] [-v] "
            "(-- PROGRAM [ARG...] | -c CMD)\n"
            "       the same as: a3s-sandbox session exec ID ...\n";
        return write(STDOUT_FILENO, usage, sizeof usage - 1) == sizeof usage - 1 ? 0 : 1;
    }
    return cli_session_exec(argc, argv, guard_paths);
}
