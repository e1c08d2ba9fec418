/* The Lua module's shared parts: the sandbox object as Lua holds it, and one exec (of a
 * sandbox or of one of its sessions). module.c: the module; lsession.c: sb:session(). */
#ifndef A3S_LMODULE_H
#define A3S_LMODULE_H

#include <lua.h>
#include <stdbool.h>

#include "a3s_sandbox.h"

#define SANDBOX_MT "a3s.Sandbox"

/* One sb:exec in progress: what its callbacks need, and the first error of any of them.
 * Stack indexes are absolute in l_exec's frame, the frame the engine calls back from. */
typedef struct lexec {
    lua_State *L;
    int output_idx; /* the on_output function, or 0 */
    int audit_idx;  /* the audit function, or 0 */
    bool failed;    /* a callback failed: no more Lua until l_exec re-raises */
    int err_idx;    /* stack slot of the error value; 0 when none could be kept */
} lexec;

/* The audit function of a sandbox, kept in the registry for the sandbox's life; `cur`
 * is the exec in progress (the engine emits events only inside a3s_sandbox_exec). */
typedef struct laudit {
    int fn_ref;
    lexec *cur;
} laudit;

typedef struct lsandbox {
    a3s_sandbox *sb;
    laudit audit;
    bool busy; /* an exec of this sandbox is in progress (its callbacks may run) */
    int sessions; /* sessions open on it (lsession.c): it may not be closed before them */
} lsandbox;

/* sb:exec / session:exec (stack: self, command, options). With sess, the command runs
 * in that session of u's sandbox. Returns the number of results (result | nil, err). */
int a3s_lmod_exec(lua_State *L, lsandbox *u, a3s_session *sess);
/* nil, msg: an operational failure. */
int a3s_lmod_fail(lua_State *L, const char *msg);

/* lsession.c: sb:session() (a method of the sandbox), and its metatable. */
int a3s_lsession_open(lua_State *L);
void a3s_lsession_register(lua_State *L);

#endif
