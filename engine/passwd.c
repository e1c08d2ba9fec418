/* The caller's passwd entry (passwd.h). */
#include "passwd.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define GETENT_MAX_OUTPUT (1024 * 1024) /* an entry is a line; far more is no entry */
#define GETENT_TIMEOUT_MS 10000

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

/* Does /etc/nsswitch.conf ask the files source first for passwd, with no action
 * ("[...]") that could make a found entry not the answer? Anything else, a missing file
 * included (the built-in default may differ between C library versions): no. */
static bool files_first(void)
{
    FILE *f = fopen("/etc/nsswitch.conf", "re");
    if (!f)
        return false;
    char line[4096];
    bool first = false, seen = false;
    while (!seen && fgets(line, sizeof line, f)) {
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (strncmp(p, "passwd:", 7) != 0)
            continue;
        seen = true;
        p += 7;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = '\0';
        if (strchr(p, '['))
            break;
        while (isspace((unsigned char)*p))
            p++;
        size_t n = strcspn(p, " \t\r\n");
        first = n == 5 && !strncmp(p, "files", 5);
    }
    fclose(f);
    return first;
}

/* uid's entry in /etc/passwd as the files source reads it (lines of NIS compat, "+..."
 * and "-...", are not entries there). 1: found (*home as passwd.h says); 0: not there;
 * -1: the file could not be read through (a line too long, a read error): not known. */
static int files_home(uid_t uid, char **home)
{
    *home = NULL;
    FILE *f = fopen("/etc/passwd", "re");
    if (!f)
        return -1;
    struct passwd pw, *res = NULL;
    char buf[16384];
    int rc = 0, e;
    while ((e = fgetpwent_r(f, &pw, buf, sizeof buf, &res)) == 0 && res) {
        if (pw.pw_name[0] == '+' || pw.pw_name[0] == '-')
            continue;
        if (pw.pw_uid == uid) {
            *home = absolute_copy(pw.pw_dir);
            rc = pw.pw_dir[0] == '/' && !*home ? -1 : 1;
            break;
        }
    }
    if (rc == 0 && e != ENOENT)
        rc = -1;
    fclose(f);
    return rc;
}

/* 1: entry's first line is uid's (seven fields): *home its home when absolute, else
 * NULL; 0: it is not (another uid's, not a passwd line); -1: out of memory. */
static int parse_entry(const char *entry, uid_t uid, char **home)
{
    *home = NULL;
    char arg[24];
    snprintf(arg, sizeof arg, "%u", (unsigned)uid);
    char *line = strndup(entry, strcspn(entry, "\n"));
    if (!line)
        return -1;
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
    int rc = nf == 7 && !extra && strcmp(field[2], arg) == 0;
    if (rc == 1 && field[5][0] == '/' && !(*home = a3s_strdup(field[5])))
        rc = -1;
    free(line);
    return rc;
}

char *a3s_passwd_entry_home(const char *entry, uid_t uid)
{
    char *home;
    return parse_entry(entry, uid, &home) == 1 ? home : NULL;
}

static long long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* `getent passwd UID`, with no environment and a time limit. */
static int getent_home(uid_t uid, char **home, a3s_error *err)
{
    static const char *const tools[] = {"/usr/bin/getent", "/bin/getent"};
    const char *tool = NULL;
    for (size_t t = 0; t < sizeof tools / sizeof *tools && !tool; t++)
        if (access(tools[t], X_OK) == 0)
            tool = tools[t];
    if (!tool)
        return a3s_fail(err, A3S_ERR_SETUP, "cannot look up the passwd entry of uid %u: no "
                        "getent program", (unsigned)uid);
    char arg[24];
    snprintf(arg, sizeof arg, "%u", (unsigned)uid);
    char *const argv[] = {"getent", "passwd", arg, NULL};
    char *const envp[] = {NULL};
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return a3s_fail(err, A3S_ERR_SETUP, "passwd lookup: pipe2: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    pid_t pid = -1;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (!rc)
            rc = posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        if (!rc)
            rc = posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        if (!rc)
            rc = posix_spawn(&pid, tool, &fa, NULL, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
    }
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        return a3s_fail(err, A3S_ERR_SETUP, "passwd lookup: cannot run %s: %s", tool,
                        strerror(rc));
    }
    char *out = malloc(GETENT_MAX_OUTPUT + 1);
    size_t have = 0;
    const char *why = out ? NULL : "out of memory";
    long long deadline = now_ms() + GETENT_TIMEOUT_MS;
    while (!why) {
        long long left = deadline - now_ms();
        struct pollfd pf = {p[0], POLLIN, 0};
        int pr = left > 0 ? poll(&pf, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            why = pr == 0 ? "no answer within 10 s" : "poll failed";
            break;
        }
        ssize_t n = read(p[0], out + have, GETENT_MAX_OUTPUT - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            why = "read failed";
        else if (n == 0)
            break;
        else if ((have += (size_t)n) == GETENT_MAX_OUTPUT)
            why = "its answer is too long";
    }
    close(p[0]);
    if (why)
        (void)kill(pid, SIGKILL);
    int status = 0;
    pid_t w;
    while ((w = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    if (!why && w != pid)
        why = "its exit status is unknown";
    else if (!why && !(WIFEXITED(status) && (WEXITSTATUS(status) == 0 ||
                                             WEXITSTATUS(status) == 2)))
        why = "it failed";
    if (!why && WEXITSTATUS(status) == 0) {
        out[have] = '\0';
        int pr = parse_entry(out, uid, home);
        if (pr == 0)
            why = "its answer is not this uid's entry";
        else if (pr < 0)
            why = "out of memory";
    }
    free(out);
    if (why) {
        free(*home);
        *home = NULL;
        return a3s_fail(err, A3S_ERR_SETUP, "cannot look up the passwd entry of uid %u "
                        "(%s passwd %s: %s)", (unsigned)uid, tool, arg, why);
    }
    return 0;
}

int a3s_passwd_home(uid_t uid, char **home, a3s_error *err)
{
    *home = NULL;
    bool dynamic = false;
    (void)dl_iterate_phdr(main_has_interp, &dynamic);
    if (dynamic) {
        struct passwd pw, *res = NULL;
        char *buf = NULL;
        int e = ERANGE;
        for (size_t size = 16384; e == ERANGE && size <= (64u << 20); size *= 4) {
            free(buf);
            if (!(buf = malloc(size)))
                return a3s_fail(err, A3S_ERR_INTERNAL, "out of memory");
            e = getpwuid_r(uid, &pw, buf, size, &res);
        }
        /* "Not found" has several spellings (getpwuid_r(3)); anything else is no answer. */
        if (e != 0 && e != ENOENT && e != ESRCH && e != EBADF && e != EPERM) {
            free(buf);
            return a3s_fail(err, A3S_ERR_SETUP, "cannot look up the passwd entry of uid "
                            "%u: %s", (unsigned)uid, strerror(e));
        }
        bool absolute = e == 0 && res && res->pw_dir && res->pw_dir[0] == '/';
        *home = absolute ? a3s_strdup(res->pw_dir) : NULL;
        free(buf);
        return absolute && !*home ? a3s_fail(err, A3S_ERR_INTERNAL, "out of memory") : 0;
    }
    if (files_first() && files_home(uid, home) == 1)
        return 0;
    free(*home);
    *home = NULL;
    return getent_home(uid, home, err);
}
