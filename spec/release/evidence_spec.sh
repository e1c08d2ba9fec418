#!/usr/bin/env bash
# scripts/collect-release-evidence.sh makes one signed directory: tool versions, the
# capability report, a test log with its summary and the escape/race summary, bench
# figures, the SBOM and the index, with SHA256SUMS and its minisign signature over all of
# it (and over a release file that was already there). The test log is a real, small
# ctest run of this build (a unit test and the escape spec, in a ctest directory of its
# own so the build's Testing/ records are left alone); the bench is a real
# `scripts/bench.sh 1` without its tracing build. A log with no ctest summary, a bench
# log that is not one, a missing key are refused; a run with a failing test is collected
# and signed but exits 1.
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"
require_sandbox
command -v minisign >/dev/null || skip_all "minisign is missing (scripts/setup.sh installs it)"
build=${A3S_BUILD_DIR:?A3S_BUILD_DIR must point at the build tree}
collect=$A3S_SOURCE_DIR/scripts/collect-release-evidence.sh
sign=$A3S_SOURCE_DIR/scripts/sign-release.sh
w=$(tmpdir)
minisign -G -W -p "$w/key.pub" -s "$w/key.sec" >/dev/null

# A real ctest run of two tests of this build, from a ctest directory of its own.
mkdir "$w/ctest"
printf 'subdirs("%s/spec")\n' "$build" >"$w/ctest/CTestTestfile.cmake"
(cd "$w" && ctest --test-dir "$w/ctest" -R '^(unit\.json|cli\.escape_spec\.caller)$') \
  >"$w/test.log" 2>&1
rc=$?
check "the small ctest run passes" eq "$rc" 0
[ "$rc" -eq 0 ] || tail -n 30 "$w/test.log" | sed 's/^/#   /'
summary=$(grep -E '^[0-9]+% tests passed' "$w/test.log")
check "... and ends with its summary ($summary)" eq "$summary" \
  "100% tests passed, 0 tests failed out of 2"

out=$w/evidence
mkdir "$out"
tar -czf "$out/a3s-sandbox-docs.tar.gz" -C "$A3S_SOURCE_DIR" README.md
# bench.sh makes a tracing build unless it cannot: a file where it would go.
: >"$w/no-trace-build"
log=$(A3S_TRACE_BUILD=$w/no-trace-build bash "$collect" --key "$w/key.sec" \
        --test-log "$w/test.log" --bench-rounds 1 "$out" 2>&1)
rc=$?
check "collect-release-evidence.sh exits 0" eq "$rc" 0
[ "$rc" -eq 0 ] || echo "$log" | tail -n 20 | sed 's/^/#   /'

for f in EVIDENCE.md versions.txt capabilities.json test.log test-summary.txt \
         attack-summary.txt bench.txt sbom.cdx.json SHA256SUMS SHA256SUMS.minisig; do
  check "$f is there" test -s "$out/$f"
  [ "$f" = EVIDENCE.md ] || check "EVIDENCE.md lists $f" grep -qF "\`$f\`" "$out/EVIDENCE.md"
done
check "EVIDENCE.md lists the release file that was there" grep -qF '`a3s-sandbox-docs.tar.gz`' "$out/EVIDENCE.md"
check "the test log is the run's" cmp -s "$w/test.log" "$out/test.log"
check "test-summary.txt: the log's ctest summary" eq "$(head -1 "$out/test-summary.txt")" "$summary"
check "test-summary.txt: says it was a partial run" \
  contains "$(cat "$out/test-summary.txt")" "this log ran 2 (a partial run)"
check "attack-summary.txt: the escape spec ran and passed" \
  contains "$(cat "$out/attack-summary.txt")" "Passed: cli.escape_spec.caller"
check "attack-summary.txt: counts it" contains "$(head -1 "$out/attack-summary.txt")" \
  "specs in this log: 1, passed 1, failed 0"
check "bench.txt: a bench run of 1 round" contains "$(head -1 "$out/bench.txt")" \
  "(1 alternating rounds, medians)"
check "bench.txt: the startup ratio" grep -q '^startup ratio cli/bare' "$out/bench.txt"
check "bench-stderr.txt: bench.sh's own note that the phases are left out" \
  grep -q 'no tracing build' "$out/bench-stderr.txt"
check "EVIDENCE.md lists bench-stderr.txt" grep -qF '`bench-stderr.txt`' "$out/EVIDENCE.md"
versions=$(cat "$out/versions.txt")
for what in "kernel: Linux" "compiler: " "cmake: cmake version" "bubblewrap: bubblewrap" \
            "libseccomp (pkg-config): " "jansson (pkg-config): " "lua: Lua 5.4" \
            "a3s-sandbox: $("$A3S" --version)"; do
  check "versions.txt: $what" contains "$versions" "$what"
done
check "capabilities.json: the CLI's report" eq \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$out/capabilities.json")" \
  "$("$A3S" --version | awk '{print $NF}')"
check "sbom.cdx.json: a CycloneDX 1.5 document" eq \
  "$(python3 -c 'import json,sys; d = json.load(open(sys.argv[1])); print(d["bomFormat"], d["specVersion"])' "$out/sbom.cdx.json")" \
  "CycloneDX 1.5"
check "SHA256SUMS covers the release file" grep -q '  a3s-sandbox-docs.tar.gz$' "$out/SHA256SUMS"
vout=$(bash "$sign" --verify --pubkey "$w/key.pub" "$out" 2>&1)
check "the evidence verifies ($vout)" eq "$?" 0
cp "$out/test-summary.txt" "$w/summary.bak"
echo "100% tests passed, 0 tests failed out of 205" >"$out/test-summary.txt"
bash "$sign" --verify --pubkey "$w/key.pub" "$out" >/dev/null 2>&1
check "an edited summary fails verification" eq "$?" 1
cp "$w/summary.bak" "$out/test-summary.txt"

# Refusals, each before anything is signed.
refused() { # WHAT MESSAGE-PART ARGS...
  local what=$1 msg=$2
  shift 2
  local o d
  d=$(tmpdir)
  o=$(bash "$collect" "$@" "$d" 2>&1)
  check "$what: refused" eq "$?" 1
  check "$what: ... saying why" contains "$o" "$msg"
  check "$what: nothing signed" test ! -e "$d/SHA256SUMS.minisig"
}
printf 'all tests passed\n' >"$w/made-up.log"
refused "a test log without a ctest summary" "no ctest summary line" \
  --key "$w/key.sec" --test-log "$w/made-up.log" --bench-log "$out/bench.txt"
refused "a bench log that is not one" "not an output of scripts/bench.sh" \
  --key "$w/key.sec" --test-log "$w/test.log" --bench-log "$w/made-up.log"
refused "no key" "a minisign secret key is needed" \
  --test-log "$w/test.log" --bench-log "$out/bench.txt"

# A real run with a failing test: collected and signed, but no release (exit 1).
mkdir "$w/failing"
printf 'add_test(always_fails false)\n' >"$w/failing/CTestTestfile.cmake"
(cd "$w" && ctest --test-dir "$w/failing") >"$w/failing.log" 2>&1
check "the failing ctest run fails" test "$?" -ne 0
d=$(tmpdir)
o=$(bash "$collect" --key "$w/key.sec" --test-log "$w/failing.log" --bench-log "$out/bench.txt" "$d" 2>&1)
check "a failing run: exit 1" eq "$?" 1
check "a failing run: not releasable" contains "$o" "not releasable"
check "a failing run: its summary says so" contains "$(cat "$d/test-summary.txt")" \
  "0% tests passed, 1 tests failed out of 1"
check "a failing run: the failed test named" contains "$(cat "$d/test-summary.txt")" "Failed: always_fails"
vout=$(bash "$sign" --verify --pubkey "$w/key.pub" "$d" 2>&1)
check "a failing run: its evidence is signed all the same ($vout)" eq "$?" 0
finish
