#!/usr/bin/env bash
# Configure and build into build/ (or $A3S_BUILD_DIR). Extra args go to cmake configure.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${A3S_BUILD_DIR:-$here/build}
cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
