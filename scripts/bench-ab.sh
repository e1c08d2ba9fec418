#!/usr/bin/env bash
# Two builds of the CLI side by side (not a test): the same `-- true` run, alternating
# which goes first, medians and the ratio of the second to the first. How a refactoring
# shows that it costs nothing:
#   scripts/bench-ab.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS]     (default 80)
# Each build dir holds a3s-sandbox; with A3S_BENCH_HELPER_PATHS=1 its helper programs are
# given by path (A3S_SANDBOX_LAUNCHER, ...), as builds before the embedded ones needed.
set -euo pipefail
old=$(cd "${1:?old build dir}" && pwd) new=$(cd "${2:?new build dir}" && pwd) rounds=${3:-80}
for b in "$old" "$new"; do
  [ -x "$b/a3s-sandbox" ] || { echo "bench-ab: no $b/a3s-sandbox" >&2; exit 1; }
done
ws=$(mktemp -d /tmp/a3s-bench-ab-XXXXXX)
trap 'rm -rf "$ws"' EXIT
python3 - "$old" "$new" "$ws" "$rounds" <<'PY'
import os, statistics, subprocess, sys, time

old, new, ws, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def env(b):
    e = dict(os.environ)
    if os.environ.get("A3S_BENCH_HELPER_PATHS") != "1":
        return e
    for var, prog in (("A3S_SANDBOX_LAUNCHER", "a3s-sandbox-launch"),
                      ("A3S_SANDBOX_RELAY", "a3s-sandbox-relay"),
                      ("A3S_SANDBOX_MEDIATOR", "a3s-sandbox-mediator")):
        e[var] = os.path.join(b, prog)
    return e

def run(b):
    t0 = time.perf_counter()
    subprocess.run([os.path.join(b, "a3s-sandbox"), "-w", ws, "--", "true"], env=env(b),
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0

t = {old: [], new: []}
for _ in range(3):  # warm-up
    run(old); run(new)
for i in range(rounds):
    for b in ((old, new) if i % 2 == 0 else (new, old)):
        t[b].append(run(b))
mo, mn = statistics.median(t[old]), statistics.median(t[new])
print(f"# {rounds} alternating rounds, medians of `a3s-sandbox -w WS -- true`")
print(f"old {old}: {mo * 1000:7.2f} ms")
print(f"new {new}: {mn * 1000:7.2f} ms")
print(f"new/old: {mn / mo:.3f}")
PY
