#!/usr/bin/env bash
# The include rules of the house (scripts/check-includes.sh): the tree keeps them, and
# the checker catches each kind of break in a copy of the tree - an engine file that
# includes a backend header, one that includes Lua, a backend that includes a binding,
# the relay including a backend, and two headers with one name.
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"

checker="$A3S_SOURCE_DIR/scripts/check-includes.sh"
out=$(bash "$checker" 2>&1)
check "the tree keeps the include rules: $out" eq "$?" 0

# A copy outside any git checkout: the checker lists files itself there.
fresh() {
  local d
  d=$(tmpdir)
  (cd "$A3S_SOURCE_DIR" && cp -r include engine backends relay bindings "$d/")
  echo "$d"
}
breaks() { # what, file, line, expected message part
  local d
  d=$(fresh)
  printf '%s\n' "$3" >>"$d/$2"
  out=$(bash "$checker" "$d" 2>&1)
  local rc=$?
  check "$1: the checker fails" eq "$rc" 1
  check "$1: it names the file and why ($out)" contains "$out" "$4"
}

d=$(fresh)
out=$(bash "$checker" "$d" 2>&1)
check "an unchanged copy passes: $out" eq "$?" 0
breaks "engine includes a backend header" engine/plan.c '#include "bwrap.h"' \
  'engine/plan.c includes "bwrap.h" from backends/linux/'
breaks "engine includes Lua" engine/env.c '#include <lua.h>' 'engine/env.c includes <lua.h>'
breaks "engine includes a Linux-only header" engine/scan.c '#include <sys/prctl.h>' \
  'engine/scan.c includes <sys/prctl.h>'
breaks "a backend includes a binding" backends/linux/exec.c '#include "policy_runtime.h"' \
  'backends/linux/exec.c includes "policy_runtime.h" from bindings/lua/'
breaks "the relay includes a backend" relay/relay.c '#include "exec.h"' \
  'relay/relay.c includes "exec.h" from backends/linux/'
breaks "the CLI includes the Lua engine" bindings/cli/main.c '#include "policy_runtime.h"' \
  'bindings/cli/main.c includes "policy_runtime.h"'
d=$(fresh)
cp "$d/engine/util.h" "$d/backends/linux/util.h"
out=$(bash "$checker" "$d" 2>&1)
check "two headers with one name: the checker fails" eq "$?" 1
check "two headers with one name: it says so ($out)" contains "$out" "header name util.h"
finish
