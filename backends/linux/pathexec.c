/* execvp as GNU libc does it (pathexec.h). Runs in the command's process before its exec,
 * which shares the launcher's memory: system calls and stack buffers only. */
#include "pathexec.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

char **a3s_pathexec_shell_argv(char *const argv[])
{
    size_t n = 0;
    while (argv[n])
        n++;
    return calloc(n + 2, sizeof(char *));
}

static const char *path_of_environ(void)
{
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, "PATH=", 5))
            return *e + 5;
    return "/bin:/usr/bin"; /* GNU libc's default (confstr _CS_PATH) */
}

/* One candidate; on ENOEXEC, the same file as a /bin/sh script (sh_argv: sh, file, the
 * arguments after argv[0]). Returns with errno set. */
static void try_exec(const char *file, char *const argv[], char **sh_argv)
{
    execve(file, argv, environ);
    if (errno != ENOEXEC || !sh_argv)
        return;
    size_t i = 0;
    sh_argv[i++] = (char *)"/bin/sh";
    sh_argv[i++] = (char *)file;
    for (size_t k = 1; argv[k]; k++)
        sh_argv[i++] = argv[k];
    sh_argv[i] = NULL;
    execve("/bin/sh", sh_argv, environ);
}

void a3s_pathexec_run(char *const argv[], char **sh_argv)
{
    const char *file = argv[0];
    if (!file || !*file) {
        errno = ENOENT;
        return;
    }
    if (strchr(file, '/')) {
        try_exec(file, argv, sh_argv);
        return;
    }
    size_t flen = strlen(file);
    if (flen > NAME_MAX) {
        errno = ENAMETOOLONG;
        return;
    }
    char buf[PATH_MAX];
    bool denied = false;
    int last = ENOENT;
    for (const char *p = path_of_environ();; p++) {
        const char *end = strchr(p, ':');
        size_t dlen = end ? (size_t)(end - p) : strlen(p);
        /* An empty entry is the current directory, as in GNU libc. */
        if (dlen + 1 + flen < sizeof buf) {
            memcpy(buf, p, dlen);
            size_t at = dlen;
            if (dlen)
                buf[at++] = '/';
            memcpy(buf + at, file, flen + 1);
            try_exec(buf, argv, sh_argv);
            switch (errno) {
            case EACCES:
                denied = true;
                break;
            case ENOENT:
            case ESTALE:
            case ENOTDIR:
            case ENODEV:
            case ETIMEDOUT:
                break;
            default:
                return; /* found, but it cannot run: that is the answer */
            }
            last = errno;
        }
        if (!end)
            break;
        p = end;
    }
    errno = denied ? EACCES : last;
}
