-- LuaRocks package of a3s-sandbox: the Lua module `require "a3s_sandbox"`, the
-- a3s-sandbox CLI and the shipped policies, built with the project's CMake build.
--
--   luarocks --lua-version 5.4 make a3s-sandbox-0.1.0-1.rockspec      (from a checkout)
--
-- How LuaRocks installs a CMake rock: CMake installs into $(PREFIX), the rock's own
-- directory (<tree>/lib/luarocks/rocks-5.4/a3s-sandbox/0.1.0-1); LuaRocks then moves
-- what is under $(LIBDIR) = $(PREFIX)/lib into the tree's C module dir
-- (<tree>/lib/lua/5.4), keeping relative paths, and copies $(PREFIX)/bin to <tree>/bin.
-- The module must therefore be installed directly into $(LIBDIR) (A3S_LUA_CMOD_DIR).
-- Everything else stays in the rock's directory: the policies
-- ($(PREFIX)/share/a3s-sandbox/policies), found relative to the running CLI or module
-- (the A3S_POLICY_REL_* paths below, from <tree>/bin and <tree>/lib/lua/5.4), and the
-- C library and its pkg-config file, in $(PREFIX)/clib, away from the Lua module dir.
-- The helper programs are embedded in the CLI and the module.
rockspec_format = "3.0"
package = "a3s-sandbox"
version = "0.1.0-1"

source = {
  url = "git+https://github.com/a3s-sandbox/a3s-sandbox.git",
  tag = "v0.1.0",
}

description = {
  summary = "Fail-closed command sandbox for Linux with Lua 5.4 policies",
  detailed = [[
An untrusted command becomes a bounded process tree with explicit workspace,
credential, environment, network and lifecycle limits, enforced by the kernel
(bubblewrap namespaces and a seccomp filter). Policies are Lua 5.4 scripts that build
an enforcement plan; the C engine validates, freezes and enforces it.
`require "a3s_sandbox"` gives Lua-hosted tools sandbox.new{...}, sb:exec(...),
sb:plan(), sb:digest(). Needs bubblewrap (/usr/bin/bwrap) at run time and
unprivileged user namespaces.]],
  license = "MIT",
  labels = { "sandbox", "security", "linux", "seccomp" },
}

supported_platforms = { "linux" }

dependencies = {
  "lua >= 5.4, < 5.5",
}

external_dependencies = {
  SECCOMP = { header = "seccomp.h", library = "seccomp" },
  JANSSON = { header = "jansson.h", library = "jansson" },
  NETTLE = { header = "nettle/sha2.h", library = "nettle" },
}

build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    -- The C library and a3s-sandbox.pc: not into $(LIBDIR), which LuaRocks treats as
    -- Lua C modules.
    CMAKE_INSTALL_LIBDIR = "clib",
    -- The Lua module, straight into the rock's module dir (see above).
    A3S_LUA_CMOD_DIR = "$(LIBDIR)",
    -- Where the policies are, from where LuaRocks puts the CLI and the module.
    A3S_POLICY_REL_BIN = "../lib/luarocks/rocks-5.4/a3s-sandbox/0.1.0-1/share/a3s-sandbox/policies",
    A3S_POLICY_REL_LUA = "../../luarocks/rocks-5.4/a3s-sandbox/0.1.0-1/share/a3s-sandbox/policies",
    -- The specs need the source tree and a sandbox-capable host: not built here.
    BUILD_TESTING = "OFF",
  },
}
