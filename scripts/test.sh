#!/usr/bin/env bash
# The whole suite: install what is missing, build (normal and ASan+UBSan), prepare the
# unprivileged test user, run the sanitizer build's unit tests, then every test with
# ctest (its summary line is the last thing printed).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/setup.sh"

# The sandbox specs also run as this unprivileged user (spec/cli/run.sh).
if [ "$(id -u)" -eq 0 ] && ! id a3s-test >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash a3s-test
fi

if [ "${A3S_SKIP_ASAN:-0}" != 1 ]; then
  echo "== unit tests under ASan+UBSan (build-asan/)"
  A3S_BUILD_DIR="$here/build-asan" "$here/scripts/build.sh" -DA3S_SANITIZE=ON
  log=$(mktemp)
  if ! ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$here/build-asan" -R '^unit\.' \
       --output-on-failure -j 2 >"$log" 2>&1; then
    cat "$log"; rm -f "$log"; exit 1
  fi
  tail -n 3 "$log"; rm -f "$log"
fi

echo "== full suite (build/)"
"$here/scripts/build.sh"
exec ctest --test-dir "${A3S_BUILD_DIR:-$here/build}" --output-on-failure -j 2 "$@"
