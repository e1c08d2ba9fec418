/* A C program using the installed library through pkg-config: the README example. */
#include <a3s_sandbox.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    a3s_error err;
    a3s_options o = {.workspace = argv[1]};
    a3s_sandbox *sb = a3s_sandbox_new(&o, &err);
    if (!sb) {
        fprintf(stderr, "new: %s\n", err.msg);
        return 1;
    }
    a3s_exec_request req = A3S_EXEC_REQUEST_INIT;
    req.shell_command = "printf c-api-ok; exit 5";
    a3s_result r;
    int rc = 1;
    if (a3s_sandbox_exec(sb, &req, &r, &err) == A3S_OK) {
        rc = (strcmp(r.stdout_text, "c-api-ok") == 0 && r.has_exit_code && r.exit_code == 5 &&
              strcmp(r.backend, "linux-bwrap") == 0)
                 ? 0
                 : 1;
        printf("%s exit=%d backend=%s\n", r.stdout_text, r.exit_code, r.backend);
        a3s_result_free(&r);
    } else {
        fprintf(stderr, "exec: %s\n", err.msg);
    }
    a3s_sandbox_free(sb);
    return rc;
}
