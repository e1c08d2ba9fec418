/* The a3s-sandbox command's parts, shared by its files: options.c reads the command line
 * (and prints --help), main.c runs what it asks for. Only bindings/cli/ includes this. */
#ifndef A3S_CLI_H
#define A3S_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "a3s_sandbox.h"
#include "util.h"

#define EXIT_TIMEOUT 124
#define EXIT_REFUSED 125
#define EXIT_OUTPUT_CLOSED (128 + SIGPIPE) /* what a shell pipeline reports */

typedef struct cli {
    const char *cmd; /* run, probe, plan, digest, capabilities, check, serve */
    const char *policy, *workspace, *shell_command, *check_policy, *audit;
    const char *backend; /* --backend (plan, capabilities), or NULL: the host's own */
    double timeout_s;
    bool has_timeout, json, allow_process_host, allow_host_root, explain, verbose, neutral, tty;
    const char **env;
    size_t nenv;
    char **argv;
    const char **grants;
    size_t ngrants;
    const char *grant_digest;
} cli;

/* run.c: one command run and reported as the CLI does (in sess when not NULL); with
 * cancel_fd >= 0 (a session's worker) that fd cancels it and an abort is reported by the
 * caller, else the CLI's own signals do. Returns the exit status. */
typedef struct a3s_session a3s_session;
int cli_run(a3s_sandbox *sb, a3s_session *sess, const cli *c, const bool closed_std[3],
            int cancel_fd);
/* Async-signal-safe: what cli_run still has to write to its reader is given up (a
 * session's worker being stopped). */
void cli_run_abandon_output(void);
/* Messages shared by the subcommands (run.c): -v lines, refusals with their stage. */
extern bool verbose;
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int fail_at(const char *stage, const char *what, const a3s_error *err);
void describe(a3s_sandbox *sb, const cli *c);
/* "1", "true", "yes", "on" (any case, spaces around): an environment switch is on. */
bool truthy(const char *v);
/* session.c: `a3s-sandbox session ...` (argv from "session" on), and its usage message
 * (returns the refusal's exit code). */
int cli_session_main(int argc, char **argv);
int cli_session_usage(const char *what, const char *arg);
/* session_client.c: `session exec` and `stop` (argv from the subcommand on; for exec,
 * argv[1] is the session id, as a3s-sandbox-exec's own argv has it). guard_paths: the
 * paths this program is reached by, which the worker protects in the workspace (the
 * CLI's a3s_instdir_guard_paths; a3s-sandbox-exec has no policy directories).
 * session_list.c: `session list`. */
typedef int (*cli_guard_paths_fn)(char **image, a3s_strv *files, a3s_strv *dirs);
int cli_session_exec(int argc, char **argv, cli_guard_paths_fn guard_paths);
int cli_session_stop(int argc, char **argv);
int cli_session_list(void);

/* --json promises exactly one JSON object on stdout (README): with it, every refusal of
 * a command whose output is JSON (run, plan, capabilities) also prints
 * {"error": {"code", "message"}} there. Decided from argv before parsing
 * (cli_argv_wants_json), since a usage error can come before --json is read. */
extern bool json_errors;

/* --json before `--`, for run (the default command), plan or capabilities. */
bool cli_argv_wants_json(int argc, char **argv);
/* Reads argv into c; prints --help/--version and exits, or refuses (exit 125). */
void cli_parse(cli *c, int argc, char **argv);

/* The refusal object on stdout when --json was given (code: an a3s_status name, or
 * "usage"); the caller prints the human message on stderr as before. */
void json_error(const char *code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A refused command line: the message on stderr (and as JSON), exit 125. */
void die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
