#!/usr/bin/env bash
# `cmake --install` into a fresh prefix installs everything, and each installed piece
# works from there: the CLI (with the installed policies and launcher, and a mediated run
# through the installed relay and mediator), a C program built with pkg-config against
# the installed library, and the Lua module on the standard Lua 5.4 cpath layout.
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"
require_sandbox

prefix=$(tmpdir)
ws=$(tmpdir)
cmake --install "$A3S_BUILD_DIR" --prefix "$prefix" >/dev/null
check "install exits 0" eq "$?" 0

libdir=$(cd "$prefix" && ls -d lib* | head -1)
for f in bin/a3s-sandbox include/a3s_sandbox.h "$libdir"/liba3s_sandbox.so \
         share/a3s-sandbox/policies/baseline.lua share/a3s-sandbox/policies/lib/env.lua \
         libexec/a3s-sandbox/a3s-sandbox-launch libexec/a3s-sandbox/a3s-sandbox-relay \
         libexec/a3s-sandbox/a3s-sandbox-mediator share/man/man1/a3s-sandbox.1 \
         share/man/man5/a3s-sandbox-policy.5 share/bash-completion/completions/a3s-sandbox; do
  check "installed $f" test -e "$prefix/$f"
done
pc=$(find "$prefix" -name a3s-sandbox.pc | head -1)
check "installed pkg-config file" test -n "$pc"
mod=$(find "$prefix" -path '*/lua/5.4/a3s_sandbox.so' | head -1)
check "installed Lua module under lua/5.4" test -n "$mod"

export A3S_SANDBOX_LAUNCHER="$prefix/libexec/a3s-sandbox/a3s-sandbox-launch"
export A3S_SANDBOX_POLICY_PATH="$prefix/share/a3s-sandbox/policies"
out=$("$prefix/bin/a3s-sandbox" -w "$ws" -- printf installed-cli-ok)
check "installed CLI runs a command" eq "$out" "installed-cli-ok"

# A mediated run with the installed relay and mediator: the CONNECT to a host that is not
# granted is answered 403 by the mediator, and its refusal comes back in the result.
export A3S_SANDBOX_RELAY="$prefix/libexec/a3s-sandbox/a3s-sandbox-relay"
export A3S_SANDBOX_MEDIATOR="$prefix/libexec/a3s-sandbox/a3s-sandbox-mediator"
out=$("$prefix/bin/a3s-sandbox" -w "$ws" --json --grant a3s-probe.invalid:1 -c \
  'exec 3<>/dev/tcp/127.0.0.1/24731 && printf "CONNECT other.invalid:1 HTTP/1.1\r\n\r\n" >&3 && head -c 12 <&3')
check "installed mediator answers a mediated run" contains "$out" '"stdout":"HTTP/1.1 403"'
check "installed mediator records the refusal" contains "$out" '"target":"other.invalid:1"'

# C program through pkg-config (the prefix in the .pc file is the configured one, so
# point the compiler at the staged prefix explicitly).
exe="$ws/../example-$$"
cc -std=c11 -o "$exe" "$A3S_SOURCE_DIR/spec/install/example.c" \
  -I"$prefix/include" -L"$(dirname "$prefix/$libdir/liba3s_sandbox.so")" -la3s_sandbox
check "C example compiles against the installed header and library" eq "$?" 0
out=$(LD_LIBRARY_PATH="$prefix/$libdir" "$exe" "$ws")
check "C example runs a sandboxed command" eq "$out" "c-api-ok exit=5 backend=linux-bwrap"
rm -f "$exe"
check "pkg-config names the library" contains "$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --libs a3s-sandbox)" "-la3s_sandbox"

# Lua module from its installed location.
out=$(WS="$ws" LUA_CPATH="$(dirname "$mod")/?.so;;" lua5.4 -e '
  local s = require "a3s_sandbox"
  local sb = assert(s.new{ workspace = os.getenv("WS") })
  local r = assert(sb:exec({ "printf", "lua-ok" }))
  io.write(r.stdout, " ", r.exit_code)' 2>&1)
check "installed Lua module runs a command" eq "$out" "lua-ok 0"
finish
