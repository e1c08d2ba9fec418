#!/usr/bin/env bash
# The whole suite: install what is missing, build (normal and ASan+UBSan), prepare the
# unprivileged test user, run the sanitizer build's unit tests, fuzz the mediator's
# parsers for a bounded time (A3S_FUZZ_SECONDS, default 60; 0 skips), then every test
# with ctest (its summary line is the last thing printed). Each step says what it does
# and how long it usually takes (2 vCPUs; a first run builds three trees: 25 to 35
# minutes in all).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# "first time" when the build tree has not been configured yet.
first() { [ -f "$1/CMakeCache.txt" ] && echo "$2" || echo "$3"; }
echo "== checking the Debian packages (scripts/setup.sh installs what is missing)"
"$here/scripts/setup.sh"

# The sandbox specs also run as this unprivileged user (spec/cli/run.sh).
if [ "$(id -u)" -eq 0 ] && ! id a3s-test >/dev/null 2>&1; then
  useradd --create-home --shell /bin/bash a3s-test
fi

if [ "${A3S_SKIP_ASAN:-0}" != 1 ]; then
  echo "== unit tests under ASan+UBSan (build-asan/; A3S_SKIP_ASAN=1 skips)"
  echo "   building: $(first "$here/build-asan" "seconds when little changed" "first time, about 2 minutes")"
  A3S_BUILD_DIR="$here/build-asan" "$here/scripts/build.sh" -DA3S_SANITIZE=ON
  echo "   running $(ctest --test-dir "$here/build-asan" -N -R '^unit\.' | sed -n 's/^Total Tests: //p') unit tests (about 1 minute)"
  log=$(mktemp)
  if ! ASAN_OPTIONS=detect_leaks=1 ctest --test-dir "$here/build-asan" -R '^unit\.' \
       --output-on-failure -j 2 >"$log" 2>&1; then
    cat "$log"; rm -f "$log"; exit 1
  fi
  tail -n 3 "$log"; rm -f "$log"
fi

fuzz_seconds=${A3S_FUZZ_SECONDS:-60}
case "$fuzz_seconds" in
  ''|*[!0-9]*) echo "A3S_FUZZ_SECONDS must be a number of seconds, not '$fuzz_seconds'" >&2; exit 2 ;;
esac
if [ "$fuzz_seconds" -gt 0 ]; then
  fuzz_build="$here/build-fuzz"
  echo "== fuzz_parsers for ${fuzz_seconds}s (build-fuzz/, clang + libFuzzer; A3S_FUZZ_SECONDS=0 skips)"
  echo "   building: $(first "$fuzz_build" "seconds" "first time, about 1 minute")"
  if ! cmake -S "$here" -B "$fuzz_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DCMAKE_C_COMPILER=clang >/dev/null ||
     ! cmake --build "$fuzz_build" --target fuzz_parsers -j "$(nproc)" >/dev/null; then
    echo "fuzz_parsers could not be built (clang with libFuzzer: scripts/setup.sh installs it)" >&2
    exit 1
  fi
  # libFuzzer adds the inputs it finds to its first corpus directory and writes crash
  # reproducers next to artifact_prefix: both go to a temporary directory, never into
  # the source tree (the seeds are copied).
  fuzz_work=$(mktemp -d "${TMPDIR:-/tmp}/a3s-fuzz.XXXXXX")
  mkdir "$fuzz_work/corpus" "$fuzz_work/artifacts"
  cp "$here"/spec/fuzz/corpus/* "$fuzz_work/corpus/"
  if ! "$fuzz_build/spec/fuzz_parsers" -max_total_time="$fuzz_seconds" -timeout=10 \
       -artifact_prefix="$fuzz_work/artifacts/" -print_final_stats=1 \
       "$fuzz_work/corpus" >"$fuzz_work/log" 2>&1; then
    tail -n 40 "$fuzz_work/log"
    echo "fuzz_parsers failed; reproducer(s), kept with the log in $fuzz_work:" >&2
    for f in "$fuzz_work"/artifacts/*; do
      [ -e "$f" ] && echo "  $fuzz_build/spec/fuzz_parsers $f" >&2
    done
    exit 1
  fi
  grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' "$fuzz_work/log" || true
  rm -rf "$fuzz_work"
fi

build=${A3S_BUILD_DIR:-$here/build}
echo "== full suite ($build)"
echo "   building: $(first "$build" "seconds when little changed" "first time, about 1 to 2 minutes")"
"$here/scripts/build.sh"
echo "   running $(ctest --test-dir "$build" -N "$@" | sed -n 's/^Total Tests: //p') tests, 2 at a time (the whole suite takes 13 to 25 minutes on 2 vCPUs, a third of it the race specs; the CLI specs run as root and as a3s-test)"
exec ctest --test-dir "$build" --output-on-failure -j 2 "$@"
