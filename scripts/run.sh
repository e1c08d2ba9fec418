#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the CLI with the given arguments,
# e.g. scripts/run.sh -- echo inside sandbox
#
# The helper programs (launcher, relay, mediator) and the shipped policies are built into
# the CLI, so one file is the whole program. It runs from a copy outside the source tree:
# the default workspace is the current directory, often this very tree, and a workspace
# that holds the running program is refused (the command could replace it for the next
# run).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${A3S_BUILD_DIR:-$here/build}
# Progress on stderr (stdout is the command's), and only when there is something slow to
# wait for: setup.sh says when it installs packages; a first build says so here.
"$here/scripts/setup.sh"
if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "run.sh: first run: configuring and building in $build (usually about a minute)..." >&2
fi
"$here/scripts/build.sh"
stage=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/a3s-sandbox/bin
mkdir -p "$stage"
install -m 0755 "$build/a3s-sandbox" "$stage/a3s-sandbox.new"
mv -f "$stage/a3s-sandbox.new" "$stage/a3s-sandbox"
exec "$stage/a3s-sandbox" "$@"
