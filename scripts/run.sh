#!/usr/bin/env bash
# Quick start: install what is missing, build, and run the CLI with the given arguments,
# e.g. scripts/run.sh -- echo inside sandbox
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"
"$here/scripts/build.sh"
exec "${A3S_BUILD_DIR:-$here/build}/a3s-sandbox" "$@"
