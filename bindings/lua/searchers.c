/* The Lua module's search templates, guarded (searchers.h). */
#include "searchers.h"

#include <lauxlib.h>
#include <string.h>

#include "sandbox.h"

int a3s_searchers_guard(lua_State *L, a3s_sandbox *sb, a3s_error *err)
{
    static const char *const fields[] = {"path", "cpath"};
    int rc = 0;
    lua_getglobal(L, "package");
    for (size_t f = 0; f < 2 && rc == 0 && lua_istable(L, -1); f++) {
        lua_getfield(L, -1, fields[f]);
        const char *t = lua_tostring(L, -1);
        while (t && *t && rc == 0) {
            size_t len = strcspn(t, ";");
            luaL_Buffer b;
            luaL_buffinit(L, &b);
            for (size_t i = 0; i < len; i++) {
                if (t[i] == '?')
                    luaL_addstring(&b, "a3s_sandbox");
                else
                    luaL_addchar(&b, t[i]);
            }
            luaL_pushresult(&b);
            const char *cand = lua_tostring(L, -1);
            if (cand && cand[0])
                rc = a3s_sandbox_guard_path(sb, cand, false, err);
            lua_pop(L, 1);
            t += len;
            if (*t == ';')
                t++;
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    return rc;
}
