#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the CLI with the given arguments,
# e.g. scripts/run.sh -- echo inside sandbox
#
# Nothing is staged: the helper programs (launcher, relay, mediator) and the shipped
# policies are built into the CLI, so it runs from any directory, this source tree
# included, and no file the command could rewrite is what a later run executes or
# enforces.
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
exec "$build/a3s-sandbox" "$@"
