/* a3s-sandbox session list: the caller's live sessions, one line each; what a killed
 * supervisor left is removed on the way. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "session_io.h"

static int list(const char *dir, FILE *out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n != A3S_SIO_ID_LEN + 5 || strcmp(e->d_name + A3S_SIO_ID_LEN, ".json"))
            continue;
        char id[A3S_SIO_ID_LEN + 1], path[512], sock[512];
        memcpy(id, e->d_name, A3S_SIO_ID_LEN);
        id[A3S_SIO_ID_LEN] = '\0';
        if (!a3s_sio_valid_id(id))
            continue;
        snprintf(path, sizeof path, "%s/%s.json", dir, id);
        snprintf(sock, sizeof sock, "%s/%s.sock", dir, id);
        int c = a3s_sio_connect(sock, NULL);
        if (c < 0) {
            /* Its supervisor was killed: nothing serves there any more. */
            if (errno == ECONNREFUSED || errno == ENOENT) {
                (void)unlink(sock);
                (void)unlink(path);
            }
            continue;
        }
        close(c); /* the supervisor's worker sees an empty request and goes */
        json_t *j = json_load_file(path, 0, NULL);
        fprintf(out, "%s pid=%lld policy=%s workspace=%s\n", id,
                (long long)json_integer_value(json_object_get(j, "pid")),
                json_string_value(json_object_get(j, "policy")) ?: "?",
                json_string_value(json_object_get(j, "workspace")) ?: "?");
        json_decref(j);
    }
    closedir(d);
    return 0;
}

int cli_session_list(void)
{
    char dir[256];
    if (a3s_sio_dir(dir, sizeof dir) < 0) {
        fprintf(stderr, "a3s-sandbox: session: the state directory %s: %s\n", dir,
                strerror(errno));
        return EXIT_REFUSED;
    }
    return list(dir, stdout) < 0 ? EXIT_REFUSED : 0;
}
