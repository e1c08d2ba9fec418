/* The process-host backend (host.c): no local boundary; opt-in only. */
#ifndef A3S_HOST_BACKEND_H
#define A3S_HOST_BACKEND_H

#include "a3s_sandbox.h"
#include "backend.h"

int a3s_host_backend_new(const a3s_backend_host *h, a3s_backend **out, a3s_error *err);

#endif
