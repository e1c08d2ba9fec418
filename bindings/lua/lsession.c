/* sb:session() in the Lua module: one warm boundary for many commands (a3s_session_*).
 *
 *   local s = sb:session()        -- session | nil, err
 *   local r = s:exec(cmd, opts)   -- exactly as sb:exec (same arguments and result)
 *   s:close()                     -- also on __gc and __close
 *
 * A session keeps its sandbox alive (a user value) and is counted on it: the sandbox
 * cannot be closed before its sessions. Its commands' audit events and callbacks are the
 * sandbox's, as for sb:exec. */
#include <lauxlib.h>
#include <lua.h>

#include "lmodule.h"

#define SESSION_MT "a3s.Session"

typedef struct lsession {
    a3s_session *s;
    lsandbox *u; /* anchored by user value 1 */
} lsession;

int a3s_lsession_open(lua_State *L)
{
    lsandbox *u = luaL_checkudata(L, 1, "a3s.Sandbox");
    if (!u->sb)
        return luaL_error(L, "a3s_sandbox: session: the sandbox is closed");
    if (u->busy)
        return luaL_error(L, "a3s_sandbox: session: the sandbox is running a command "
                             "(called from one of its callbacks)");
    lsession *ls = lua_newuserdatauv(L, sizeof *ls, 1);
    ls->s = NULL;
    ls->u = NULL;
    luaL_setmetatable(L, SESSION_MT);
    a3s_error err = {0};
    if (a3s_session_open(u->sb, &ls->s, &err) != 0)
        return a3s_lmod_fail(L, err.msg);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    ls->u = u;
    u->sessions++;
    return 1;
}

static int l_session_exec(lua_State *L)
{
    lsession *ls = luaL_checkudata(L, 1, SESSION_MT);
    if (!ls->s)
        return a3s_lmod_fail(L, "exec: the session is closed");
    if (ls->u->busy)
        return luaL_error(L, "a3s_sandbox: exec: the sandbox is running a command (called "
                             "from one of its callbacks)");
    return a3s_lmod_exec(L, ls->u, ls->s);
}

static int l_session_close(lua_State *L)
{
    lsession *ls = luaL_checkudata(L, 1, SESSION_MT);
    if (ls->u && ls->u->busy)
        return luaL_error(L, "a3s_sandbox: close: the sandbox is running a command (called "
                             "from one of its callbacks)");
    if (ls->s) {
        a3s_session_close(ls->s); /* idempotent: __gc and __close may both run */
        ls->s = NULL;
        ls->u->sessions--;
    }
    return 0;
}

static int l_session_tostring(lua_State *L)
{
    lsession *ls = luaL_checkudata(L, 1, SESSION_MT);
    lua_pushstring(L, ls->s ? "a3s.Session" : "a3s.Session(closed)");
    return 1;
}

/* As the module's own functions: each a closure over its name and "is a method", which
 * the argument errors of a3s_lmod_exec read (module.c). */
static void set_named(lua_State *L, const luaL_Reg *l)
{
    for (; l->name; l++) {
        lua_pushstring(L, l->func == l_session_close ? "close" : l->name);
        lua_pushboolean(L, 1);
        lua_pushcclosure(L, l->func, 2);
        lua_setfield(L, -2, l->name);
    }
}

void a3s_lsession_register(lua_State *L)
{
    static const luaL_Reg methods[] = {{"exec", l_session_exec}, {"close", l_session_close},
                                       {NULL, NULL}};
    static const luaL_Reg meta[] = {{"__gc", l_session_close}, {"__close", l_session_close},
                                    {"__tostring", l_session_tostring}, {NULL, NULL}};
    luaL_newmetatable(L, SESSION_MT);
    set_named(L, meta);
    luaL_newlibtable(L, methods);
    set_named(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}
