#!/usr/bin/env bash
# `cmake --install` into a fresh prefix installs everything, and the install stands on its
# own: no installed file names the build tree or the source checkout, and a copy of the
# prefix moved elsewhere (the first one removed, the build and source trees out of sight
# where the host allows it) runs from $HOME and from the source checkout: the CLI with its
# own policies and the helper programs embedded in it (a mediated run too, and a session
# command through the session client a3s-sandbox-exec), a C program
# built with pkg-config against the moved prefix, and the Lua module from its lua/5.4 dir.
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"
require_sandbox

build=$(cd "$A3S_BUILD_DIR" && pwd -P) src=$(cd "$A3S_SOURCE_DIR" && pwd -P)
first=$(tmpdir)
cmake --install "$A3S_BUILD_DIR" --prefix "$first" >/dev/null
check "install exits 0" eq "$?" 0

libdir=$(cd "$first" && ls -d lib* | head -1)
for f in bin/a3s-sandbox bin/a3s-sandbox-exec include/a3s_sandbox.h "$libdir"/liba3s_sandbox.so \
         share/a3s-sandbox/policies/baseline.lua share/a3s-sandbox/policies/lib/env.lua \
         share/man/man1/a3s-sandbox.1 share/man/man5/a3s-sandbox-policy.5 \
         share/bash-completion/completions/a3s-sandbox; do
  check "installed $f" test -e "$first/$f"
done
check "no helper program is installed as a file (they are embedded)" \
  eq "$(find "$first" -name 'a3s-sandbox-launch*' -o -name 'a3s-sandbox-relay*' -o -name 'a3s-sandbox-mediator*')" ""
check "no installed file names the build tree" eq "$(grep -rlaF "$build" "$first")" ""
check "no installed file names the source checkout" eq "$(grep -rlaF "$src" "$first")" ""

# The prefix moved: nothing may depend on where it was installed.
prefix=$(tmpdir)
cp -a "$first/." "$prefix/" && rm -rf "$first"
pc=$(find "$prefix" -name a3s-sandbox.pc | head -1)
check "installed pkg-config file" test -n "$pc"
mod=$(find "$prefix" -path '*/lua/5.4/a3s_sandbox.so' | head -1)
check "installed Lua module under lua/5.4" test -n "$mod"
cli="$prefix/bin/a3s-sandbox"
home=$(tmpdir)
ws=$(tmpdir)
# Nothing of the test environment points at the build: the installed pieces alone.
unset A3S_SANDBOX_LAUNCHER A3S_SANDBOX_RELAY A3S_SANDBOX_MEDIATOR A3S_SANDBOX_POLICY_PATH

# Runs "$@" with the build and source trees hidden (an empty tmpfs over each) when this
# host lets us make a mount namespace; else as it is (the checks above already showed
# that no installed file names them).
hidden() {
  if [ "$(id -u)" = 0 ] && unshare -m --propagation private true 2>/dev/null; then
    unshare -m --propagation private bash -c \
      'mount -t tmpfs none "$1" && mount -t tmpfs none "$2" && shift 2 && exec "$@"' \
      hide "$build" "$src" "$@"
  else
    "$@"
  fi
}
# From a project directory in $HOME (HOME itself is never a workspace).
mkdir -p "$home/project"
in_home() { (cd "$home/project" && HOME="$home" hidden "$@"); }

out=$(in_home "$cli" -- printf installed-cli-ok 2>&1)
check "from \$HOME, build tree hidden: -- printf runs" eq "$out" "installed-cli-ok"
out=$(in_home "$cli" -- true 2>&1)
check "from \$HOME: -- true exits 0" eq "$?:$out" "0:"
out=$(in_home "$cli" digest 2>&1)
check "from \$HOME: digest is 64 hex" eq "$(printf '%s' "$out" | grep -cE '^[0-9a-f]{64}$')" 1
out=$(in_home "$cli" plan 2>&1)
check "from \$HOME: plan's policy comes from the moved prefix" \
  contains "$out" "$prefix/share/a3s-sandbox/policies/baseline.lua"
check "from \$HOME: plan names no build or source path" not_contains "$out" "$src"
check "from \$HOME: the launcher is the embedded image" contains "$out" '"/proc/self/fd/13"'
out=$(in_home "$cli" probe 2>&1)
check "from \$HOME: probe exits 0" eq "$?" 0
out=$(in_home "$cli" capabilities 2>&1)
check "from \$HOME: capabilities: mediated HTTP works" contains "$out" '"mediated_http":true'

# A mediated run: the embedded relay and mediator. The CONNECT to a host that is not
# granted is answered 403 by the mediator, and its refusal comes back in the result.
out=$(in_home "$cli" -w "$ws" --json --grant a3s-probe.invalid:1 -c \
  'exec 3<>/dev/tcp/127.0.0.1/24731 && printf "CONNECT other.invalid:1 HTTP/1.1\r\n\r\n" >&3 && head -c 12 <&3')
check "installed mediator answers a mediated run" contains "$out" '"stdout":"HTTP/1.1 403"'
check "installed mediator records the refusal" contains "$out" '"target":"other.invalid:1"'

# A session, its command through the installed session client (one mount namespace for
# both: a session takes commands from its caller's own namespaces only).
out=$(in_home bash -c 'id=$("$1" session start -w "$2") || exit; "$(dirname "$1")/a3s-sandbox-exec" "$id" -- printf session-client-ok; rc=$?; "$1" session stop "$id"; exit $rc' sess "$cli" "$ws" 2>&1)
check "from \$HOME: the installed a3s-sandbox-exec runs a session's command" eq "$out" "session-client-ok"

# From the source checkout (the default workspace then holds the build tree): the moved
# install uses its own policies and embedded helpers, none of the checkout's files.
out=$(cd "$src" && HOME="$home" "$cli" -- printf from-checkout 2>&1)
check "from the checkout: -- printf runs" eq "$out" "from-checkout"
out=$(cd "$src" && HOME="$home" "$cli" digest 2>&1)
check "from the checkout: digest is 64 hex" eq "$(printf '%s' "$out" | grep -cE '^[0-9a-f]{64}$')" 1
out=$(cd "$src" && HOME="$home" "$cli" plan 2>&1)
check "from the checkout: plan's policy comes from the moved prefix" \
  contains "$out" "$prefix/share/a3s-sandbox/policies/baseline.lua"
(cd "$src" && HOME="$home" "$cli" probe >/dev/null 2>&1)
check "from the checkout: probe exits 0" eq "$?" 0

# pkg-config: the .pc file is relocatable (its prefix is where it lies).
export PKG_CONFIG_PATH=$(dirname "$pc")
check "pkg-config's prefix is the moved prefix" \
  eq "$(cd "$(pkg-config --variable=prefix a3s-sandbox)" && pwd -P)" "$(cd "$prefix" && pwd -P)"
exe="$ws/../example-$$"
# shellcheck disable=SC2046
cc -std=c11 -o "$exe" "$A3S_SOURCE_DIR/spec/install/example.c" \
  $(pkg-config --cflags --libs a3s-sandbox)
check "C example builds with pkg-config --cflags --libs against the moved prefix" eq "$?" 0
out=$(cd "$home" && LD_LIBRARY_PATH="$(pkg-config --variable=libdir a3s-sandbox)" hidden "$exe" "$ws")
check "C example runs a sandboxed command" eq "$out" "c-api-ok exit=5 backend=linux-bwrap"
rm -f "$exe"

# Lua module from its installed location.
out=$(cd "$home" && WS="$ws" LUA_CPATH="$(dirname "$mod")/?.so;;" hidden lua5.4 -e '
  local s = require "a3s_sandbox"
  local sb = assert(s.new{ workspace = os.getenv("WS") })
  local r = assert(sb:exec({ "printf", "lua-ok" }))
  io.write(r.stdout, " ", r.exit_code)' 2>&1)
check "installed Lua module runs a command" eq "$out" "lua-ok 0"
finish
