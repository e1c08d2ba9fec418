/* a3s-sandbox serve: newline-delimited JSON requests on stdin, answers on stdout
 * (docs/PROTOCOL.md). serve_req.c reads one request line into a checked request (no I/O:
 * the unit test drives it alone); serve.c runs the loop and a worker process per request;
 * serve_worker.c runs one request in its worker. */
#ifndef A3S_SERVE_H
#define A3S_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "a3s_sandbox.h"

/* Limits of the protocol (docs/PROTOCOL.md "Limits"). */
#define A3S_SERVE_MAX_LINE (1024 * 1024) /* bytes of one request line, without its '\n' */
#define A3S_SERVE_MAX_INFLIGHT 16        /* requests running at once (a worker each) */
#define A3S_SERVE_MAX_ID 256             /* bytes of a string id */
#define A3S_SERVE_MAX_CHUNK 65536        /* bytes of data in one output event */

typedef enum a3s_serve_op {
    A3S_SERVE_PROBE,
    A3S_SERVE_EXEC,
    A3S_SERVE_DIGEST,
    A3S_SERVE_CAPABILITIES,
    A3S_SERVE_PLAN,
    A3S_SERVE_CANCEL,
} a3s_serve_op;

/* One checked request. Strings point into root (kept alive with it) except env and
 * stdin, which are built here. */
typedef struct a3s_serve_req {
    json_t *root;
    json_t *id;     /* integer or string (a reference into root), or NULL when unusable */
    a3s_serve_op op;
    const char **argv;          /* NULL-terminated, or NULL */
    const char *command;        /* or NULL: exactly one of argv and command for exec */
    char **env;                 /* "NAME=VALUE", NULL-terminated, or NULL */
    char *stdin_data;           /* NULL: no input */
    size_t stdin_len;
    int64_t timeout_ms;         /* -1: the policy's ceiling */
    const char *cwd;            /* or NULL */
    const char **grants;        /* NULL-terminated, or NULL */
    size_t ngrants;
    const char *grant_digest;   /* or NULL */
    json_t *target;             /* cancel: the exec's id (a reference into root) */
} a3s_serve_req;

/* Reads line[0..len) into *r. Returns NULL, or the refusal's code ("bad_json",
 * "bad_request", "unknown_op") with a message in msg; r->id is then the request's id when
 * it had a usable one (for the answer), else NULL. Release r with a3s_serve_req_free in
 * both cases. */
const char *a3s_serve_req_parse(const char *line, size_t len, a3s_serve_req *r, char *msg,
                                size_t msg_size);
void a3s_serve_req_free(a3s_serve_req *r);

/* `a3s-sandbox serve` with its parsed options (cli.h); returns the exit status. */
struct cli;
int cli_serve_main(const struct cli *c);

/* serve_worker.c. The answer line (with its '\n', malloc'd; NULL on ENOMEM) about the
 * request id (NULL: json null): {"id","ok":true,"result"} when result is given (not
 * stolen), else {"id","ok":false,"error":{"code","message"}}. */
char *a3s_serve_answer(const json_t *id, json_t *result, const char *code, const char *message);
/* A sandbox with the server's options and, when r is given, the request's grants. */
a3s_sandbox *a3s_serve_sandbox(const struct cli *c, const a3s_serve_req *r, bool defer,
                               a3s_error *err);
/* Runs request r in this (forked, single-threaded) worker: answers as tagged lines on
 * out ('E' an event, 'F' the final message; out is non-blocking, and an exec waits for
 * room on it only until its deadline); a byte on cancel_fd kills an exec's tree ('c' a
 * cancel request, 's' the server ending). Returns the worker's exit status. */
int a3s_serve_worker(const struct cli *c, const a3s_serve_req *r, int out, int cancel_fd);

#endif
