/* The macos-seatbelt backend (macos.c): a frozen plan becomes a Seatbelt profile (sbpl.h)
 * that `/usr/bin/sandbox-exec -p` enforces. Built everywhere, so that its profile can be
 * described and checked on any host; it runs commands only on macOS (macos_exec.h). */
#ifndef A3S_MACOS_BACKEND_H
#define A3S_MACOS_BACKEND_H

#include "a3s_sandbox.h"
#include "backend.h"

/* Make the backend. Elsewhere than macOS it is made all the same: its unusable() says
 * "macOS only", every run is refused before anything starts, and plans are described. */
int a3s_macos_backend_new(const a3s_backend_host *h, a3s_backend **out, a3s_error *err);

#endif
