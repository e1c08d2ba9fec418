/* A fresh run's sandbox started ahead (ahead.h). */
#include "ahead.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bwrap.h"
#include "exec.h"
#include "protocol.h"

int a3s_ahead_start(a3s_warm *w, const a3s_ahead_spec *s, a3s_error *err)
{
    *w = (a3s_warm)A3S_WARM_NONE;
    a3s_strv args = {0};
    int args_fd = -1, status[2] = {-1, -1};
    int rc = -1;
    bool mapped = s->userns >= 0;
    if (a3s_bwrap_ahead_args(mapped, &args, err) < 0 ||
        (args_fd = a3s_bwrap_args_memfd(&args, err)) < 0)
        goto out;
    if (pipe2(status, O_CLOEXEC) < 0) {
        a3s_fail_errno(err, A3S_ERR_SETUP, errno, "ahead: pipe2");
        goto out;
    }
    char fdnum[16];
    snprintf(fdnum, sizeof fdnum, "%d", A3S_FD_ARGS);
    /* The launcher's options as a fresh run's (bwrap.c), with --warm and no command: the
     * command's argv comes with the handover, these options again in front of it. */
    char *argv[10];
    size_t n = 0;
    argv[n++] = (char *)s->bwrap;
    argv[n++] = "--args";
    argv[n++] = fdnum;
    argv[n++] = "--";
    argv[n++] = A3S_FD_PATH(A3S_FD_LAUNCHER_IMAGE);
    if (s->tag) {
        argv[n++] = "--tag";
        argv[n++] = (char *)s->tag;
    }
    argv[n++] = "--setup";
    argv[n++] = "--warm";
    argv[n] = NULL;
    static char *const empty_env[] = {NULL};
    a3s_launch l = {
        .path = s->bwrap,
        .argv = argv,
        .envp = empty_env, /* bwrap itself runs with nothing from the caller */
        .cwd = s->cwd,
        .stdin_fd = -1,
        .started_fd = -1,
        .status_fd = -1,
        .nofile = -1, /* the plan's limits come with the setup records ("limit") */
        .core_bytes = -1,
        .fsize = -1,
        .cancel_fd = -1,
        .tty_fd = -1,
    };
    l.keep[l.nkeep++] = (a3s_fdmap){args_fd, A3S_FD_ARGS, false};
    l.keep[l.nkeep++] = (a3s_fdmap){status[1], A3S_FD_STATUS, false};
    l.keep[l.nkeep++] = (a3s_fdmap){s->launcher_img, A3S_FD_LAUNCHER_IMAGE, false};
    if (mapped)
        l.keep[l.nkeep++] = (a3s_fdmap){s->userns, A3S_FD_USERNS, false};
    args_fd = status[1] = -1;
    if (a3s_warm_start(w, &l, err) < 0) /* consumes the keep fds */
        goto out_consumed;
    w->status = status[0];
    status[0] = -1;
    rc = 0;
    goto out_consumed;
out:
    if (s->launcher_img >= 0)
        close(s->launcher_img);
    if (s->userns >= 0)
        close(s->userns);
out_consumed:
    if (args_fd >= 0)
        close(args_fd);
    for (int i = 0; i < 2; i++)
        if (status[i] >= 0)
            close(status[i]);
    a3s_strv_free(&args);
    return rc;
}

bool a3s_ahead_args_fit(const a3s_strv *args, bool mapped)
{
    a3s_strv want = {0};
    a3s_error e = {0};
    bool same = a3s_bwrap_ahead_args(mapped, &want, &e) == 0;
    size_t j = 0;
    for (size_t i = 0; same && i < args->n; i++) {
        if (!strcmp(args->v[i], "--setenv") && i + 2 < args->n) {
            i += 2; /* the option, its name and its value */
            continue;
        }
        same = j < want.n && !strcmp(args->v[i], want.v[j]);
        j++;
    }
    same = same && j == want.n;
    a3s_strv_free(&want);
    return same;
}
