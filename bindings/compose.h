/* The composition root's choice of backend (compose.c): which backends this build knows,
 * and a sandbox with a named one. a3s_sandbox_new (the public header) is the host's own
 * backend: a3s_compose_new with NULL. */
#ifndef A3S_COMPOSE_H
#define A3S_COMPOSE_H

#include "a3s_sandbox.h"

/* The backends this build knows, this host's own first, NULL-terminated. */
const char *const *a3s_compose_backends(void);

/* A sandbox with the named backend (NULL: this host's own, with the process-host fallback
 * when opts->allow_process_host and the native boundary is unusable). A named backend is
 * used as named, never replaced by a weaker one: one that cannot run here (macos-seatbelt
 * on Linux) is made, describes plans and refuses every run, saying why; process-host only
 * with opts->allow_process_host. An unknown name (windows included: there is no backend
 * for it) is A3S_ERR_INVALID, naming the known ones. */
a3s_sandbox *a3s_compose_new(const a3s_options *opts, const char *backend, a3s_error *err);

#endif
