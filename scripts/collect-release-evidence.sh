#!/usr/bin/env bash
# One directory of release evidence, signed:
#   scripts/collect-release-evidence.sh [OPTIONS] OUT_DIR [-- TEST_ARGS...]
#     --build-dir DIR     the build the evidence is about (default build/, or $A3S_BUILD_DIR)
#     --test-log FILE     the output of an earlier `scripts/test.sh` (its ctest summary is
#                         read from it); without it scripts/test.sh runs here (about 10
#                         minutes), with TEST_ARGS passed on to it (and so to ctest)
#     --bench-log FILE    the output of an earlier `scripts/bench.sh`; without it
#                         scripts/bench.sh runs here with --bench-rounds rounds (default 40)
#     --bench-rounds N
#     --key FILE          minisign secret key for the signature (default $A3S_MINISIGN_KEY)
# OUT_DIR gets: versions.txt (compiler, cmake, bubblewrap, libseccomp, Lua, jansson,
# nettle, kernel, ...), capabilities.json, test.log with test-summary.txt and
# attack-summary.txt (the escape, race and hostile-workspace specs), bench.txt, the SBOM
# (sbom.cdx.json, scripts/generate-sbom.sh), the index EVIDENCE.md, and last SHA256SUMS
# with SHA256SUMS.minisig over every file in OUT_DIR (scripts/sign-release.sh; files
# already there, such as a source archive, are covered too). Nothing is made up: a
# summary that cannot be read from its log is an error, and a partial test run (fewer
# tests than the build has) is said to be one.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
usage() { # the comment at the top; exit status $1 (default 2)
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit "${1:-2}"
}
die() { echo "collect-release-evidence: $*" >&2; exit 1; }

build=${A3S_BUILD_DIR:-$here/build} test_log="" bench_log="" rounds=40 key=${A3S_MINISIGN_KEY:-}
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
    --test-log) [ $# -ge 2 ] || usage; test_log=$2; shift 2 ;;
    --bench-log) [ $# -ge 2 ] || usage; bench_log=$2; shift 2 ;;
    --bench-rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
    --key) [ $# -ge 2 ] || usage; key=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "collect-release-evidence: unknown option $1" >&2; usage ;;
    *) [ -z "$out" ] || usage; out=$1; shift ;;
  esac
done
[ -n "$out" ] || usage
case "$rounds" in ''|*[!0-9]*|0) die "--bench-rounds must be a positive number, not '$rounds'" ;; esac
[ -n "$key" ] && [ -f "$key" ] || die "a minisign secret key is needed: --key FILE or A3S_MINISIGN_KEY"
for f in "$test_log" "$bench_log"; do
  [ -z "$f" ] || [ -f "$f" ] || die "no such log: $f"
done
cli=$build/a3s-sandbox
[ -x "$cli" ] || die "no $cli: build first (scripts/build.sh)"
mkdir -p "$out"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)
cli=$build/a3s-sandbox

# Copies a given log to OUT_DIR/NAME (unless it is that very file).
take() {
  [ "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" = "$out/$2" ] || cp "$1" "$out/$2"
}

# --- tool versions: the first line each tool prints, or what is missing -------------
first_line() { "$@" 2>&1 | sed -n '/[^[:space:]]/{p;q}'; }
pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "not installed"; }
{
  echo "a3s-sandbox: $("$cli" --version)"
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "kernel: $(uname -srvm)"
  echo "compiler: $(first_line "$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")" --version)"
  echo "cmake: $(first_line cmake --version)"
  echo "build type: $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")"
  echo "bubblewrap: $(first_line bwrap --version) (package bubblewrap $(pkgver bubblewrap))"
  for lib in libseccomp jansson nettle lua5.4; do
    echo "$lib (pkg-config): $(pkg-config --modversion "$lib" 2>&1)"
  done
  echo "lua: $(first_line lua5.4 -v)"
  for p in libseccomp2 libjansson4 libnettle8 liblua5.4-0 libc6 libc6-dev musl-dev; do
    echo "package $p: $(pkgver "$p")"
  done
  echo "python3: $(first_line python3 --version)"
  echo "minisign: $(first_line minisign -v)"
} >"$out/versions.txt"
ws=$(mktemp -d "${TMPDIR:-/tmp}/a3s-evidence-ws-XXXXXX")  # the report's workspace: any empty one
caps_ok=0
"$cli" capabilities -w "$ws" >"$out/capabilities.json" 2>"$out/capabilities.err" && caps_ok=1
rmdir "$ws"
[ "$caps_ok" = 1 ] || die "a3s-sandbox capabilities failed: $(cat "$out/capabilities.err")"
rm -f "$out/capabilities.err"

# --- the tests -------------------------------------------------------------------------
if [ -n "$test_log" ]; then
  take "$test_log" test.log
  test_source="given with --test-log ($(basename "$test_log"))"
else
  echo "collect-release-evidence: running scripts/test.sh $* (the whole suite, without arguments, takes about 10 minutes)" >&2
  rc=0
  A3S_BUILD_DIR=$build "$here/scripts/test.sh" "$@" >"$out/test.log" 2>&1 || rc=$?
  test_source="scripts/test.sh $*, run by this script (exit $rc;"
  test_source+=" A3S_SKIP_ASAN=${A3S_SKIP_ASAN:-0}, A3S_FUZZ_SECONDS=${A3S_FUZZ_SECONDS:-60})"
fi
total=$(ctest --test-dir "$build" -N 2>/dev/null | sed -n 's/^Total Tests: //p')
python3 - "$out" "${total:-0}" <<'PY' || exit 1
import re, sys
out, total = sys.argv[1], int(sys.argv[2])
log = open(f"{out}/test.log", errors="replace").read().splitlines()
summary = [l for l in log if re.match(r"^\d+% tests passed, \d+ tests? failed out of \d+$", l)]
if not summary:
    sys.exit("collect-release-evidence: test.log has no ctest summary line "
             "('N% tests passed, N tests failed out of N'): not a complete test run")
ran = int(summary[-1].rsplit(" ", 1)[1])
failed = int(re.search(r"(\d+) tests? failed", summary[-1]).group(1))
# One line per test: "  3/12 Test  #45: cli.escape_spec.caller .....   Passed    2.10 sec".
results = []
for l in log:
    m = re.match(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(?:\*\*\*)?(Passed|Failed|Skipped|Not Run|Timeout|Exception)\b", l)
    if m:
        results.append((m.group(1), m.group(2)))
count = lambda rs, s: sum(1 for _, r in rs if r == s)
with open(f"{out}/test-summary.txt", "w") as f:
    f.write(summary[-1] + "\n")
    f.write(next((l.strip() for l in log if l.startswith("Total Test time")), "") + "\n")
    f.write(f"passed {count(results, 'Passed')}, failed {failed}, skipped "
            f"{count(results, 'Skipped') + count(results, 'Not Run')}\n")
    f.write(f"this build has {total} tests; this log ran {ran}"
            + (" (a partial run)\n" if ran < total else " (the whole suite)\n"))
    for l in log:  # scripts/test.sh's own steps: ASan+UBSan unit tests, the fuzzer.
        if l.startswith("== ") or l.startswith("stat::") or l.startswith("Done "):
            f.write(l + "\n")
    for name, r in results:
        if r != "Passed":
            f.write(f"{r}: {name}\n")
# The specs that attack the boundary: escapes, races with concurrent runs, workspaces
# prepared by earlier runs (THREAT_MODEL.md).
attack = re.compile(r"^cli\.(escape|race_mask|race_nested|hostile_layout|planted_symlink|symlink|"
                    r"hardlink|path_links|case_variants|setid|userns|secrets|gitdir|"
                    r"nested_git|identity|fault)_spec\.")
hits = [(n, r) for n, r in results if attack.match(n)]
with open(f"{out}/attack-summary.txt", "w") as f:
    f.write(f"escape/race/hostile-workspace specs in this log: {len(hits)}, passed "
            f"{count(hits, 'Passed')}, failed {sum(1 for _, r in hits if r not in ('Passed', 'Skipped', 'Not Run'))}, "
            f"skipped {count(hits, 'Skipped') + count(hits, 'Not Run')}\n")
    if not hits:
        f.write("none of them ran in this log\n")
    for n, r in hits:
        f.write(f"{r}: {n}\n")
PY

# --- the benchmarks --------------------------------------------------------------------
if [ -n "$bench_log" ]; then
  take "$bench_log" bench.txt
  rm -f "$out/bench-stderr.txt"  # an earlier collection's, not this log's
  bench_source="given with --bench-log ($(basename "$bench_log"))"
else
  echo "collect-release-evidence: running scripts/bench.sh $rounds" >&2
  A3S_CLI=$cli "$here/scripts/bench.sh" "$rounds" >"$out/bench.txt" 2>"$out/bench-stderr.txt" ||
    die "scripts/bench.sh failed: $(tail -n 5 "$out/bench-stderr.txt")"
  bench_source="scripts/bench.sh $rounds, run by this script (its messages: \`bench-stderr.txt\`)"
fi
grep -q '^startup ratio cli/bare' "$out/bench.txt" ||
  die "bench.txt has no 'startup ratio cli/bare' line: not an output of scripts/bench.sh"

# --- SBOM, index, signature ------------------------------------------------------------
"$here/scripts/generate-sbom.sh" "$build" "$out/sbom.cdx.json"

own=" EVIDENCE.md versions.txt capabilities.json test.log test-summary.txt attack-summary.txt bench.txt bench-stderr.txt sbom.cdx.json SHA256SUMS SHA256SUMS.minisig "
others=$(cd "$out" && find . -type f | sed 's|^\./||' | LC_ALL=C sort |
         while IFS= read -r f; do case "$own" in *" $f "*) ;; *) echo "- \`$f\`" ;; esac; done)
{
  echo "# a3s-sandbox $("$cli" --version | awk '{print $NF}') release evidence"
  echo
  echo "Collected $(date -u +%Y-%m-%dT%H:%M:%SZ) from the build \`$(basename "$build")\`"
  echo "($(sed -n 's/^a3s-sandbox: //p' "$out/versions.txt"), source $(git -C "$here" describe --always --dirty 2>/dev/null || echo "not a git checkout"))."
  echo
  echo "| file | what |"
  echo "| --- | --- |"
  echo "| \`versions.txt\` | compiler, cmake, bubblewrap, libseccomp, Lua, jansson, nettle, kernel, OS |"
  echo "| \`capabilities.json\` | \`a3s-sandbox capabilities\` on the collecting host |"
  echo "| \`test.log\` | the test run: ${test_source//|/\\|} |"
  echo "| \`test-summary.txt\` | $(head -1 "$out/test-summary.txt"); $(sed -n 4p "$out/test-summary.txt") |"
  echo "| \`attack-summary.txt\` | $(head -1 "$out/attack-summary.txt") |"
  echo "| \`bench.txt\` | scripts/bench.sh: ${bench_source//|/\\|} |"
  echo "| \`sbom.cdx.json\` | CycloneDX 1.5 SBOM of the build (scripts/generate-sbom.sh) |"
  echo "| \`SHA256SUMS\` | SHA-256 of every other file here |"
  echo "| \`SHA256SUMS.minisig\` | minisign signature of SHA256SUMS |"
  if [ -n "$others" ]; then
    echo
    echo "Release files also covered by SHA256SUMS:"
    echo
    echo "$others"
  fi
  echo
  echo "Verify with the project's published minisign public key:"
  echo
  echo '```sh'
  echo 'scripts/sign-release.sh --verify --pubkey a3s-sandbox.pub DIR'
  echo '# or by hand, in DIR:'
  echo 'minisign -V -p a3s-sandbox.pub -m SHA256SUMS && sha256sum --strict -c SHA256SUMS'
  echo '```'
} >"$out/EVIDENCE.md"

"$here/scripts/sign-release.sh" --key "$key" "$out" >&2
echo "$out/EVIDENCE.md"
# Evidence of a failing suite is kept (and signed), but it is no release.
if ! grep -q ' 0 tests failed out of ' "$out/test-summary.txt"; then
  die "the test run has failures ($(head -1 "$out/test-summary.txt")): not releasable"
fi
