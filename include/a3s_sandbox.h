/* a3s-sandbox public C API.
 *
 * A sandbox handle binds a workspace to a policy. Every exec evaluates the policy into a
 * plan, validates and freezes it, then runs the command under the Linux backend
 * (bubblewrap namespaces + a libseccomp filter). Library calls never print or exit: they
 * return a status and fill an a3s_error.
 *
 * JSON text (results, plans, capability reports, denials, audit events): host text is
 * bytes, so a path, argv or environment entry, name or message that is not valid UTF-8
 * is written as {"base64": "<standard padded base64 of the exact bytes>"} in place of a
 * string; everything else is a string. A producer that runs out of memory returns NULL,
 * never a document with members missing. */
#ifndef A3S_SANDBOX_H
#define A3S_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The shared library is built with hidden visibility: what it exports is exactly the
 * functions declared here with A3S_API (spec/install/abi_spec.sh checks it). */
#if defined(__GNUC__) || defined(__clang__)
#define A3S_API __attribute__((visibility("default")))
#else
#define A3S_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define A3S_SANDBOX_VERSION "0.1.0"

/* Error classes. A3S_ERR_REFUSED and A3S_ERR_SETUP both mean "nothing ran". */
enum a3s_status {
    A3S_OK = 0,
    A3S_ERR_INVALID = 1,  /* bad argument or request (timeout 0, NUL, bad env entry) */
    A3S_ERR_POLICY = 2,   /* the policy failed, was refused, or produced an invalid plan */
    A3S_ERR_SETUP = 3,    /* the boundary could not be set up (bwrap, userns, scratch...) */
    A3S_ERR_INTERNAL = 4, /* out of memory, unexpected system failure */
    A3S_ERR_ABORTED = 5,  /* the output observer asked to stop: the tree was killed */
};

typedef struct a3s_error {
    int code;        /* enum a3s_status */
    char msg[2048];  /* "what failed: why" */
} a3s_error;

typedef struct a3s_sandbox a3s_sandbox;

/* Audit callback: one JSON object (a line of text without the newline) per event:
 * {"ts_ms","execution_id","policy","policy_digest","backend","workspace","event",
 * "decision","reason","target"}, text encoded as above. */
typedef void (*a3s_audit_fn)(void *ud, const char *json_line);

typedef struct a3s_options {
    const char *workspace;          /* NULL: current directory */
    const char *policy;             /* name or file; NULL: "baseline" */
    const char *bwrap;              /* NULL: $A3S_SANDBOX_BWRAP or /usr/bin/bwrap */
    const char *const *policy_path; /* extra policy dirs (NULL-terminated) or NULL */
    const char *const *host_env;    /* environment the policy may read; NULL: environ */
    bool allow_process_host;        /* explicit opt-in to the unconfined fallback (no boundary) */
    const char *audit_path;         /* append JSON-lines audit events here, or NULL */
    a3s_audit_fn audit_fn;          /* and/or call this for each event, or NULL */
    void *audit_ud;
    bool defer_policy;              /* do not evaluate the policy here: every exec evaluates
                                       it anyway, so a one-shot caller saves one evaluation;
                                       policy errors then come from the first operation */
    bool allow_host_root;           /* root callers: when the command cannot run under the
                                       unprivileged mapped id here, run it as host uid 0
                                       (identity "host-root") instead of refusing */
} a3s_options;

enum a3s_stream { A3S_STDOUT = 1, A3S_STDERR = 2 };

/* Live output observer, called in the caller's thread for every chunk read (unbounded:
 * chunks past the budget are delivered too). `head_len` is how many leading bytes of this
 * chunk were kept in the capture's head (a live consumer that mirrors the capture prints
 * exactly those). Return 0 to go on; anything else kills the whole tree at once and the
 * exec returns A3S_ERR_ABORTED. */
typedef int (*a3s_output_fn)(void *ud, int stream, const char *data, size_t len,
                             size_t head_len);

typedef struct a3s_exec_request {
    const char *const *argv;   /* argv form (runs as given), or NULL */
    const char *shell_command; /* `bash -c` form, or NULL; exactly one of the two */
    int64_t timeout_ms;        /* < 0: the policy ceiling; 0 is refused */
    const char *const *env;    /* explicit "NAME=VALUE" entries, NULL-terminated, or NULL */
    int stdin_fd;              /* >= 0: the command's input: a read-only pipe is passed on,
                                  anything else (a terminal, socket, file, device) is
                                  copied through a fresh pipe; < 0: see stdin_data */
    const char *stdin_data;    /* used when stdin_fd < 0; NULL: /dev/null */
    size_t stdin_len;
    a3s_output_fn on_output;
    void *output_ud;
    int cancel_fd; /* >= 0: when it becomes readable (or hangs up), the tree is killed at
                      once and the exec returns A3S_ERR_ABORTED (e.g. a signal self-pipe) */
    /* Live output without blocking and without SIGPIPE (what a CLI does with its own
     * stdout and stderr): when mirror is set, each stream's rendering is written to
     * mirror_fd[0] (stdout) and mirror_fd[1] (stderr; -1: that stream is not written),
     * the head as it arrives and the rest (truncation marker, tail) when the command
     * ended. A reader that stops reading stops the command's output as a pipe would; the
     * deadline still holds. When the reader of a stream the command wrote to goes away,
     * the tree is killed and the result says output_closed (a shell's SIGPIPE, without
     * the signal in the caller). The fds stay the caller's; their flags are unchanged. */
    bool mirror;
    int mirror_fd[2];
    /* Where the command starts: a directory of the workspace, relative to it ("." is the
     * workspace; no leading '/', no ".." component), or NULL: the workspace. A symbolic
     * link on the way is followed only while it stays inside the workspace. One that is
     * not an existing directory there refuses the run before the command starts. */
    const char *cwd;
    /* >= 0: the master of a pseudo-terminal the caller opened (posix_openpt; grantpt and
     * unlockpt done). Its slave, never the caller's own terminal, becomes the command's
     * stdin, stdout, stderr and controlling terminal; what stdin_fd / stdin_data give is
     * written into the master (typed input: the slave's line discipline turns ^C into
     * SIGINT for the command's foreground group), and everything read from the master is
     * the stdout stream (stderr stays empty), bounded by the capture as always. With
     * mirror, every byte read is also written live to mirror_fd[0] (an interactive
     * session shows all of it; the result keeps only the bounded capture), and nothing is
     * written again after the run. The caller keeps the master (window size: TIOCSWINSZ
     * on it at any time); the run makes it non-blocking. 2 or less: no terminal (the
     * default; a zero-initialised request asks for none). */
    int tty_fd;
    /* When set: the run's deadline (CLOCK_MONOTONIC milliseconds, the same clock as
     * clock_gettime(CLOCK_MONOTONIC)) is written here before the command can write any
     * output, and again, exactly, once the timer for the command is armed. For a caller
     * whose on_output may wait (for room of its own): the deadline is only enforced when
     * on_output returns, so such a caller must not wait past it. */
    int64_t *deadline_out;
} a3s_exec_request;

#define A3S_EXEC_REQUEST_INIT                                                              \
    {NULL, NULL, -1, NULL, -1, NULL, 0, NULL, NULL, -1, false, {-1, -1}, NULL, -1, NULL}

typedef struct a3s_result {
    /* Rendered captures (head, marker, tail), lossy UTF-8, NUL-terminated. */
    char *stdout_text, *stderr_text;
    size_t stdout_len, stderr_len;
    /* The raw bytes that follow each stream's head in the rendering (marker + tail), for
     * live consumers that already printed the head (see a3s_output_fn). */
    char *stdout_rest, *stderr_rest;
    size_t stdout_rest_len, stderr_rest_len;
    int exit_code;      /* valid when has_exit_code */
    bool has_exit_code; /* false when the tree was killed (deadline) */
    int signal;         /* valid when has_signal: the signal that ended the command */
    bool has_signal;
    bool timed_out, truncated;
    uint64_t total_bytes, captured_bytes, duration_ms;
    char policy[128];
    char policy_digest[65];
    const char *backend; /* "linux-bwrap" or "process-host" (static string) */
    char *denials_json;  /* JSON array text, never NULL after a successful exec */
    char *grants_json;   /* JSON array of {host, port, policy_digest} (network_grants) */
    char execution_id[33]; /* random, also in every audit event of this execution */
    /* Who the command ran as on the host (static string): "caller" (the caller's uid),
     * "mapped" (a root caller's command under the unprivileged mapped id) or "host-root"
     * (a root caller's command as uid 0, only with allow_host_root). */
    const char *identity;
    /* The reader of a mirrored output went away (see a3s_exec_request.mirror): the tree
     * was killed then. A CLI exits 141 (128 + SIGPIPE), as a shell pipeline would. */
    bool output_closed;
} a3s_result;

A3S_API const char *a3s_version(void);

/* Create a sandbox: canonicalize the workspace, resolve bwrap and bash, load and evaluate
 * the policy once (so a broken policy fails here, as does a plan that no run could
 * enforce on any host, e.g. a seccomp rule naming a syscall libseccomp does not know;
 * the plan's paths on this host are checked by each run and by a3s_sandbox_check). Returns NULL and fills err on failure.
 * A bubblewrap or launcher that cannot be used here does not fail it: questions about the
 * policy (digest, plan, check) need no kernel boundary, and every run is refused with the
 * reason (A3S_ERR_SETUP; a3s_sandbox_probe says it at once). With allow_process_host, the
 * process-host fallback is chosen here instead, where the native boundary cannot work. */
A3S_API a3s_sandbox *a3s_sandbox_new(const a3s_options *opts, a3s_error *err);
A3S_API void a3s_sandbox_free(a3s_sandbox *sb);

A3S_API const char *a3s_sandbox_workspace(const a3s_sandbox *sb);
A3S_API const char *a3s_sandbox_policy_name(const a3s_sandbox *sb);
/* The file the policy is read from, as resolved on the policy search path. */
A3S_API const char *a3s_sandbox_policy_file(const a3s_sandbox *sb);
/* The current policy's deadline ceiling (limits.timeout_ms), which caps a request's
 * timeout_ms: from one evaluation of the policy against this host, as a run evaluates it
 * (no workspace scan; nothing is created). An error when the policy fails. */
A3S_API int a3s_sandbox_timeout_ceiling(a3s_sandbox *sb, int64_t *ms, a3s_error *err);
/* "linux-bwrap", or "process-host" when the opt-in fallback is in force. */
A3S_API const char *a3s_sandbox_backend(const a3s_sandbox *sb);
/* Non-NULL when the opt-in fallback is in force: why the native boundary is unusable. */
A3S_API const char *a3s_sandbox_fallback_reason(const a3s_sandbox *sb);

/* Run a command. Returns A3S_OK when the command ran (whatever its status, including a
 * deadline kill), else an error and nothing ran. Release r with a3s_result_free. */
A3S_API int a3s_sandbox_exec(a3s_sandbox *sb, const a3s_exec_request *req, a3s_result *r,
                             a3s_error *err);
A3S_API void a3s_result_free(a3s_result *r);
/* The result as one JSON object (README "JSON output"); malloc'd, NULL on ENOMEM.
 * stdout/stderr are the lossy UTF-8 renderings (always strings); other text is encoded as
 * above. */
A3S_API char *a3s_result_json(const a3s_result *r);

/* Sessions: one warm boundary for many commands of one (workspace, policy, grants).
 * a3s_session_open checks the sandbox's current policy (its digest is the session's) and
 * makes the boundary's long-lived namespaces (user, mount base, UTS and network); each
 * a3s_session_exec then
 * runs one command with the same request, result, audit events and errors as
 * a3s_sandbox_exec, in its own pid, mount and IPC namespaces, with a fresh /tmp and
 * scratch directory, the plan's seccomp filter, no capabilities, its own deadline, output
 * bound and quota cgroup, the workspace rescanned first (what changed there since the
 * last command is protected as in a fresh run). Commands may run concurrently (one call
 * per thread or process). The sandbox must outlive the session; the policy is evaluated
 * again for each command (the host as it is then) and cannot be replaced while a session
 * is open (a3s_sandbox_replace_policy refuses). Only linux-bwrap has sessions;
 * a session holding network grants is refused (A3S_ERR_SETUP) for now. Closing kills
 * nothing that runs (each exec has ended) and leaves nothing behind. */
typedef struct a3s_session a3s_session;
A3S_API int a3s_session_open(a3s_sandbox *sb, a3s_session **out, a3s_error *err);
A3S_API int a3s_session_exec(a3s_session *s, const a3s_exec_request *req, a3s_result *r,
                             a3s_error *err);
A3S_API void a3s_session_close(a3s_session *s);

/* Run the marker command through the real boundary; A3S_OK when it works. */
A3S_API int a3s_sandbox_probe(a3s_sandbox *sb, a3s_error *err);

/* The approval digest (64 lower-case hex + NUL): the policy digest while the sandbox
 * holds no grants; with grants, a hash over the policy digest and the normalized grant set
 * (see a3s_sandbox_grant_set). It is what an operator approves. */
A3S_API int a3s_sandbox_digest(a3s_sandbox *sb, char out[65], a3s_error *err);
/* Frozen plan / capability report as JSON text (malloc'd); NULL and err on failure.
 * Paths and argv entries that are not UTF-8 are {"base64": ...} objects (see above). */
A3S_API char *a3s_sandbox_plan_json(a3s_sandbox *sb, a3s_error *err);
A3S_API char *a3s_sandbox_capabilities_json(a3s_sandbox *sb, a3s_error *err);
/* The frozen plan as readable text, every rule with the policy file:line that produced
 * it (malloc'd); NULL and err on failure. */
A3S_API char *a3s_sandbox_plan_explain(a3s_sandbox *sb, a3s_error *err);

/* The most network grants a sandbox holds, and the most specs one grant set may list. */
#define A3S_MAX_GRANTS 256

/* Network grants: each opens mediated access to one exact origin, "HOST",
 * "HOST:PORT", "[V6]" or "[V6]:PORT" (no port: any port). A grant set is normalized: hosts
 * lower-cased, IPv6 literals canonical and without brackets; order does not matter and
 * duplicates collapse.
 *
 * An approval covers the policy and the exact grant set: when expected_digest is given it
 * must equal the approval digest of the policy with the grant set that the call would
 * leave (what a3s_sandbox_digest returns afterwards, and what `a3s-sandbox digest --grant
 * ...` prints for the same set), else the call is refused with A3S_ERR_POLICY, the message
 * naming both digests, and nothing changes. An approval is therefore never valid for any
 * other grant set, and the policy digest alone approves no grant. new_digest (may be
 * NULL) receives the approval digest after the call.
 *
 * a3s_sandbox_grant_set replaces the sandbox's grants with exactly specs[0..n) (n may be 0:
 * no grants). More than A3S_MAX_GRANTS specs are refused before any is read; an invalid
 * spec refuses the whole set (A3S_ERR_INVALID, nothing changes). Use it to check one
 * approval of several grants.
 *
 * a3s_sandbox_grant adds one grant to the set held; expected_digest is checked against
 * the set with it (an identical re-grant leaves the set, and its digest, as they are).
 * A grant that would make the set larger than A3S_MAX_GRANTS is refused. */
A3S_API int a3s_sandbox_grant_set(a3s_sandbox *sb, const char *const *specs, size_t n,
                                  const char *expected_digest, char new_digest[65], a3s_error *err);
A3S_API int a3s_sandbox_grant(a3s_sandbox *sb, const char *spec, const char *expected_digest,
                              char new_digest[65], a3s_error *err);

/* Switch the sandbox to another policy (name or file) for the executions that follow.
 * The new policy is evaluated and validated first; unless allow_broadening, an update
 * that grants anything the current policy does not is refused with A3S_ERR_POLICY
 * ("policy update broadens <what>; set allow_broadening to accept it") and nothing
 * changes. Broadening is: network, host root, a new writable root or read-only exposure,
 * a removed hide/tmpfs/protect/mask rule, protected name or secret prefix, a new scan
 * skip, more environment kept or less stripped, a changed env value, a removed syscall
 * denial or a weaker seccomp setting, a raised limit, a removed or raised quota (rules
 * labelled `discovered` count like any other). */
A3S_API int a3s_sandbox_replace_policy(a3s_sandbox *sb, const char *policy, bool allow_broadening,
                                       a3s_error *err);

/* Check the current policy as a run would, without running anything: evaluated against a
 * neutral host (what the digest covers) and, unless neutral, against this host, every
 * plan validated and checked by the backend (syscall names libseccomp knows; for this
 * host also that every non-optional path exists). A3S_OK, or A3S_ERR_POLICY with a
 * message naming the rule and the policy file:line (a run refuses the same plan). */
A3S_API int a3s_sandbox_check(a3s_sandbox *sb, bool neutral, a3s_error *err);

/* a3s_sandbox_check of a policy for this host (workspace: NULL for the current
 * directory) without keeping a sandbox; A3S_OK when a run would accept it. */
A3S_API int a3s_policy_check(const char *policy, const char *workspace, a3s_error *err);

#ifdef __cplusplus
}
#endif
#endif
