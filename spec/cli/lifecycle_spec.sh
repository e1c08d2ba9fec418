#!/usr/bin/env bash
# Lifecycle outcomes of a run through the CLI:
# - stdin larger than a pipe to a command that exits without reading it is a normal run;
# - the reader of the CLI's output goes away (yes | head -1, seq | grep -m1): the tree is
#   killed at once and the CLI exits 141 (the JSON result has "output_closed", the audit
#   an output-closed event);
# - a reader that does not read (a full pipe) never holds the deadline off: exit 124 and
#   the tree dies at the deadline, while the reader still sleeps;
# - a sandbox that never starts is a setup failure (125), never a deadline (124): a bwrap
#   that hangs, a launcher that cannot fork the command (a process quota of 3).
# After each: no a3s-sandbox-* scratch dir in the run's (private) TMPDIR, no run record
# naming it, the workspace unchanged, no process of the run.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the JSON results"

now_ns() { date +%s%N; }
elapsed_ms() { echo $((($(now_ns) - $1) / 1000000)); }
lt() { [ "$1" -lt "$2" ] || { echo "#   $1 is not < $2"; return 1; }; }
# Processes on the host whose command line matches $1 (pgrep excludes itself).
nprocs() { pgrep -f -- "$1" | wc -l; }

ws=$(tmpdir)
echo "workspace content" >"$ws/keep.txt"
mkdir "$ws/sub"
priv=$(tmpdir) # the TMPDIR of every run here: its scratch dirs go there
state=/tmp/a3s-sandbox-state-$(id -u)
mark="lifecycle-$$-$RANDOM$RANDOM"
snapshot() { (cd "$ws" && find . -printf '%p %y %m %s\n' | sort && find . -type f -exec md5sum {} + | sort); }
ws_before=$(snapshot)

# Nothing of the runs so far is left: $1 names the case.
nothing_left() {
  check "$1: no scratch dir left in TMPDIR" eq "$(find "$priv" -mindepth 1 -maxdepth 1 -name 'a3s-sandbox-*' | wc -l)" 0
  check "$1: no run record names the TMPDIR" eq "$(grep -rlsF -- "$priv/" "$state" | wc -l)" 0
  check "$1: the workspace is unchanged" eq "$(snapshot)" "$ws_before"
  check "$1: no process of the run is left" eq "$(nprocs "$mark")" 0
}

# Like run_cli, with the private TMPDIR.
run() { TMPDIR=$priv run_cli "$@"; }

# --- stdin larger than a pipe, the command does not read it ---------------------------
big=$(tmpdir)/big
head -c 1048576 /dev/zero | tr '\0' x >"$big"
out=$(head -c 1048576 /dev/zero | TMPDIR=$priv "$A3S" -w "$ws" -- true "$mark" 2>&1; echo "rc=${PIPESTATUS[1]}")
check "1 MiB piped into true: exit 0, nothing printed" eq "$out" "rc=0"
out=$(TMPDIR=$priv "$A3S" -w "$ws" -- head -c1 <"$big" 2>&1; echo " rc=$?")
check "1 MiB file into head -c1: one byte, exit 0" eq "$out" "x rc=0"
nothing_left "big stdin"

# --- the reader goes away: exit 141 at once --------------------------------------------
t0=$(now_ns)
out=$(TMPDIR=$priv "$A3S" -w "$ws" -t 30 -- yes "$mark" 2>/dev/null | head -1; echo "rc=${PIPESTATUS[0]}")
ms=$(elapsed_ms "$t0")
check "yes | head -1: the first line, then exit 141" eq "$out" "$mark
rc=141"
check "yes | head -1: well before the 30 s deadline (${ms} ms)" lt "$ms" 10000
nothing_left "yes | head -1"

t0=$(now_ns)
out=$(TMPDIR=$priv "$A3S" -w "$ws" -t 30 -- seq -f "x%g-$mark" 1000000000 2>/dev/null | grep -m1 x; echo "rc=${PIPESTATUS[0]}")
ms=$(elapsed_ms "$t0")
check "seq | grep -m1 x: the first match, then exit 141" eq "$out" "x1-$mark
rc=141"
check "seq | grep -m1 x: well before the 30 s deadline (${ms} ms)" lt "$ms" 10000
nothing_left "seq | grep -m1"

# The JSON result says output_closed: false for a normal run.
run -w "$ws" --json -- echo "$mark"
check "--json: exit 0" eq "$RC" 0
check "--json: output_closed is false" eq \
  "$(python3 -c 'import json,sys; print(json.load(sys.stdin)["output_closed"])' <<<"$OUT")" False

# The audit of a closed run has an output-closed event.
audit=$(tmpdir)/audit.jsonl
out=$(TMPDIR=$priv "$A3S" -w "$ws" -t 30 --audit "$audit" -- yes "$mark" 2>/dev/null | head -1 >/dev/null; echo "${PIPESTATUS[0]}")
check "audited yes | head -1: exit 141" eq "$out" 141
check "the audit has an output-closed event" python3 - "$audit" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()]
assert any(e["event"] == "output" and e["decision"] == "deny" and e["reason"] == "output-closed"
           for e in ev), ev
PY
nothing_left "audited closed run"

# --- a reader that does not read never holds the deadline off --------------------------
# $1: case name; $2: bytes already in the pipe (a reader that has not read them); $3: id;
# the reader sleeps 6 s, the deadline is 2 s, and the tree must be gone at ~3.5 s.
deadline_case() {
  local name=$1 prefill=$2 m="$mark-$3" rcf cnt t0 seen=0
  rcf=$(tmpdir)/rc cnt=$(tmpdir)/count
  t0=$(now_ns)
  ( { head -c "$prefill" /dev/zero
      TMPDIR=$priv "$A3S" -w "$ws" -t 2 -c ": $m; head -c 1000000 /dev/zero; sleep 60; :" 2>/dev/null
    } | (sleep 6; wc -c >"$cnt"); echo "${PIPESTATUS[0]}" >"$rcf" ) &
  local bg=$!
  # The tree is seen while it runs (the command's bash carries the marker, and stays: a
  # command follows the sleep; bubblewrap and the launcher, started before the command
  # was known, do not)...
  while [ "$(elapsed_ms "$t0")" -lt 1900 ]; do
    [ "$(nprocs "-c -- : $m")" -gt 0 ] && { seen=1; break; }
    sleep 0.05
  done
  check "$name: the sandboxed tree ran" eq "$seen" 1
  sleep "$(python3 -c "print(max(0.0, 3.5 - $(elapsed_ms "$t0") / 1000))")"
  # ... and is gone after the deadline, while the reader still sleeps.
  check "$name: the tree died at the deadline, the reader still asleep ($(elapsed_ms "$t0") ms)" \
    eq "$(nprocs "-c -- : $m")" 0
  wait "$bg"
  check "$name: exit 124" eq "$(cat "$rcf")" 124
  check "$name: the reader got the output" test "$(cat "$cnt")" -gt "$prefill"
}
deadline_case "reader asleep" 0 a
deadline_case "reader asleep, pipe full" 65536 b
nothing_left "deadline with a sleeping reader"

# --- a bwrap that hangs: 125, not 124 ---------------------------------------------------
stubdir=$(tmpdir)
stub=$stubdir/bwrap-hang-$mark
cat >"$stub" <<EOF
#!/bin/bash
# $mark: never starts the sandbox
while :; do /bin/sleep 1; done
EOF
chmod 0755 "$stub"
t0=$(now_ns)
A3S_SANDBOX_BWRAP=$stub run -w "$ws" -t 1 -c "touch $ws/hang-ran"
ms=$(elapsed_ms "$t0")
check "hanging bwrap: exit 125, not 124 (got $RC)" eq "$RC" 125
check "hanging bwrap: it was not up within the setup bound" contains "$ERR" "was not up within 10 s"
check "hanging bwrap: not reported as a timeout of the command" not_contains "$ERR" "command timed out"
# (the command's -t 1 counts from its start; setting up has its own 10 s bound)
check "hanging bwrap: the CLI returned soon after the 10 s setup bound (${ms} ms)" lt "$ms" 20000
check "hanging bwrap: nothing ran" test ! -e "$ws/hang-ran"
check "hanging bwrap: the stub is gone" eq "$(nprocs "bwrap-hang-$mark")" 0
nothing_left "hanging bwrap"

# --- a launcher that cannot fork the command: 125 ---------------------------------------
pol=$(tmpdir)
printf 'local plan = a3s.extend("baseline", "two-procs")\nplan:limits{ processes = 2 }\nreturn plan\n' >"$pol/two.lua"
run_cli capabilities -w "$ws"
can_pids=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["quotas"]["processes"]["enforceable"])' <<<"$OUT")
audit2=$(tmpdir)/audit.jsonl
run -w "$ws" -p "$pol/two.lua" --audit "$audit2" -t 30 -c "touch $ws/fork-ran"
check "process quota 2: exit 125 (got $RC)" eq "$RC" 125
check "process quota 2: nothing ran" test ! -e "$ws/fork-ran"
if [ "$can_pids" = True ]; then
  # bwrap and the launcher (the namespace's pid 1) make two: the launcher's fork fails
  # (EAGAIN).
  check "process quota 2: the message names the launcher" contains "$ERR" "launcher could not start the command"
  check "process quota 2: and why" contains "$ERR" "Resource temporarily unavailable"
  id=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["execution_id"])' "$audit2")
  check "process quota 2: the run's cgroup was removed" \
    eq "$(find /sys/fs/cgroup -maxdepth 8 -type d -name "a3s-sandbox-$id" 2>/dev/null | wc -l)" 0
else
  # No quota here: the run is refused before anything starts.
  check "process quota 2 (no cgroup here): refused, naming the quota" contains "$ERR" "pids quota"
fi
nothing_left "launcher fork failure"
finish
