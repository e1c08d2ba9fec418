/* The caller's passwd entry (passwd.h). */
#include "passwd.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pwd.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

#define GETENT_MAX_OUTPUT (64 * 1024)

/* Does the main program have a dynamic loader (PT_INTERP)? Then the C library is the
 * shared one, which loads name-service modules as designed. */
static int main_has_interp(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    bool *dynamic = data;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP)
            *dynamic = true;
    return 1; /* dl_iterate_phdr lists the main program first: only it */
}

static char *absolute_copy(const char *dir)
{
    return dir && dir[0] == '/' ? a3s_strdup(dir) : NULL;
}

/* /etc/passwd alone (fgetpwent_r parses it; no module is loaded). *found: uid has an
 * entry there. */
static char *files_home(uid_t uid, bool *found)
{
    *found = false;
    FILE *f = fopen("/etc/passwd", "re");
    if (!f)
        return NULL;
    struct passwd pw, *res = NULL;
    char buf[16384];
    char *home = NULL;
    while (fgetpwent_r(f, &pw, buf, sizeof buf, &res) == 0 && res) {
        if (pw.pw_uid == uid) {
            *found = true;
            home = absolute_copy(pw.pw_dir);
            break;
        }
    }
    fclose(f);
    return home;
}

char *a3s_passwd_entry_home(const char *entry, uid_t uid)
{
    char arg[24];
    snprintf(arg, sizeof arg, "%u", (unsigned)uid);
    char *line = strndup(entry, strcspn(entry, "\n"));
    if (!line)
        return NULL;
    char *home = NULL;
    char *field[7];
    int nf = 0;
    bool extra = false; /* more than seven fields: not a passwd line */
    for (char *s = line; s && nf < 7; nf++) {
        field[nf] = s;
        char *colon = strchr(s, ':');
        if (colon)
            *colon++ = '\0';
        s = colon;
        extra = nf == 6 && colon;
    }
    if (nf == 7 && !extra && strcmp(field[2], arg) == 0)
        home = absolute_copy(field[5]);
    free(line);
    return home;
}

/* `getent passwd UID` from the C library's own package, with no environment: its output
 * line "name:password:uid:gid:gecos:home:shell", checked to be uid's. */
static char *getent_home(uid_t uid)
{
    static const char *const tools[] = {"/usr/bin/getent", "/bin/getent"};
    char arg[24], out[GETENT_MAX_OUTPUT];
    snprintf(arg, sizeof arg, "%u", (unsigned)uid);
    char *const argv[] = {"getent", "passwd", arg, NULL};
    char *const envp[] = {NULL};
    size_t have = 0;
    bool ran = false;
    for (size_t t = 0; t < sizeof tools / sizeof *tools && !ran; t++) {
        int p[2];
        if (access(tools[t], X_OK) < 0 || pipe2(p, O_CLOEXEC) < 0)
            continue;
        posix_spawn_file_actions_t fa;
        pid_t pid = -1;
        int rc = posix_spawn_file_actions_init(&fa);
        if (rc == 0) {
            if (posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0 &&
                posix_spawn_file_actions_adddup2(&fa, p[1], 1) == 0 &&
                posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) == 0)
                rc = posix_spawn(&pid, tools[t], &fa, NULL, argv, envp);
            else
                rc = -1;
            posix_spawn_file_actions_destroy(&fa);
        }
        close(p[1]);
        if (rc == 0) {
            ran = true;
            for (;;) {
                ssize_t n = read(p[0], out + have, sizeof out - 1 - have);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n <= 0)
                    break;
                have += (size_t)n;
                if (have == sizeof out - 1)
                    break;
            }
            int status;
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
            }
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                have = 0; /* no entry (2), or it failed: nothing known */
        }
        close(p[0]);
    }
    out[have] = '\0';
    return a3s_passwd_entry_home(out, uid);
}

char *a3s_passwd_home(uid_t uid)
{
    bool dynamic = false;
    (void)dl_iterate_phdr(main_has_interp, &dynamic);
    if (dynamic) {
        struct passwd *pw = getpwuid(uid);
        return pw ? absolute_copy(pw->pw_dir) : NULL;
    }
    /* Asked up to three times per sandbox: the answer of the first is kept (a static
     * program here is this project's CLI, which runs no threads). */
    static bool known;
    static uid_t known_uid;
    static char *known_home;
    if (!known || known_uid != uid) {
        bool found;
        char *home = files_home(uid, &found);
        if (!found)
            home = getent_home(uid);
        free(known_home);
        known_home = home;
        known_uid = uid;
        known = true;
    }
    return absolute_copy(known_home);
}
