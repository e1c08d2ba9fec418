#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the CLI with the given arguments,
# e.g. scripts/run.sh -- echo inside sandbox
#
# The programs that run inside the sandbox (launcher, relay) and the network mediator
# that runs on the host for it must not live in the workspace, and the default workspace
# is the current directory, often this very source tree: stage them outside it (the CLI
# refuses in-workspace copies, fail closed).
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
install -m 0755 "$build/a3s-sandbox-launch" "$build/a3s-sandbox-relay" \
  "$build/a3s-sandbox-mediator" "$stage/"
export A3S_SANDBOX_LAUNCHER=${A3S_SANDBOX_LAUNCHER:-$stage/a3s-sandbox-launch}
export A3S_SANDBOX_RELAY=${A3S_SANDBOX_RELAY:-$stage/a3s-sandbox-relay}
export A3S_SANDBOX_MEDIATOR=${A3S_SANDBOX_MEDIATOR:-$stage/a3s-sandbox-mediator}
# The policies too: a policy directory inside the workspace is not searched (the command
# could rewrite what the next run enforces). A fresh copy each time.
rm -rf "$stage/policies"
cp -R "$here/policies" "$stage/policies"
export A3S_SANDBOX_POLICY_PATH=${A3S_SANDBOX_POLICY_PATH:+$A3S_SANDBOX_POLICY_PATH:}$stage/policies
exec "$build/a3s-sandbox" "$@"
