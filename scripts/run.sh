#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the CLI with the given arguments,
# e.g. scripts/run.sh -- echo inside sandbox
#
# The helper programs (launcher, relay, mediator) and the shipped policies are embedded in
# the CLI. A copy of policies/ outside the source tree is also put on the policy path, for
# policies added there since the build: the build's copy (build/share/a3s-sandbox/policies)
# lies in the default workspace when this runs from the source tree, and a policy directory
# inside the workspace is never searched (the command could rewrite what the next run
# enforces).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
build=${A3S_BUILD_DIR:-$here/build}
stage=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/a3s-sandbox
mkdir -p "$stage"
# A fresh copy of the policies each time, outside the source tree.
rm -rf "$stage/policies"
cp -R "$here/policies" "$stage/policies"
export A3S_SANDBOX_POLICY_PATH=${A3S_SANDBOX_POLICY_PATH:+$A3S_SANDBOX_POLICY_PATH:}$stage/policies
exec "$build/a3s-sandbox" "$@"
