/* Where `require "a3s_sandbox"` looks (package.path before package.cpath; Debian's
 * "./?.lua" first): a command must not plant there what the next script loads instead of
 * this module. */
#ifndef A3S_LUA_SEARCHERS_H
#define A3S_LUA_SEARCHERS_H

#include <lua.h>

#include "a3s_sandbox.h"

/* Guards every template of package.path and package.cpath, with "a3s_sandbox" for '?',
 * like the module's own path (a3s_sandbox_guard_path). 0, or -1 with err. */
int a3s_searchers_guard(lua_State *L, a3s_sandbox *sb, a3s_error *err);

#endif
