#!/usr/bin/env bash
# Resource quotas (policies/README.md, "Limits"): a fork bomb under a process limit,
# a memory hog under a memory limit, a CPU quota, a file-size limit; cgroups removed
# afterwards; fail closed where no cgroup is writable (an unprivileged caller here, or a
# cgroup root pointed at a read-only directory); and the audit trail.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
pol=$(tmpdir)
quota_policy() { # name, limits table body
  printf 'local plan = a3s.extend("baseline", "%s")\nplan:limits{ %s }\nreturn plan\n' "$1" "$2" >"$pol/$1.lua"
}
quota_policy procs 'processes = 24'
quota_policy mem 'memory_bytes = 64 * 1024 * 1024'
quota_policy cpu 'cpu_millicores = 200'
quota_policy fsize 'file_size_bytes = 1024 * 1024'
quota_policy zero 'processes = 0'

ids=()
remember_id() { ids+=("$(echo "$OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["execution_id"])' 2>/dev/null)"); }
our_cgroups() { # cgroup directories of the runs above that still exist
  local n=0 id
  for id in "${ids[@]}"; do
    [ -n "$id" ] && n=$((n + $(find /sys/fs/cgroup -maxdepth 8 -type d -name "a3s-sandbox-$id" 2>/dev/null | wc -l)))
  done
  echo "$n"
}

run_cli capabilities -w "$ws"
caps=$OUT
can_pids=$(echo "$caps" | python3 -c 'import json,sys; print(json.load(sys.stdin)["quotas"]["processes"]["enforceable"])')
can_mem=$(echo "$caps" | python3 -c 'import json,sys; print(json.load(sys.stdin)["quotas"]["memory_bytes"]["enforceable"])')
check "capabilities report quotas with a reason or a mechanism" contains "$caps" '"quotas"'
check "file size is always enforceable (rlimit)" contains "$caps" '"file_size_bytes":{"enforceable":true,"via":"rlimit"}'

# A zero quota is refused at validation, nothing runs.
run_cli -p "$pol/zero.lua" -w "$ws" -c "touch $ws/zero-ran"
check "zero quota refused (125)" eq "$RC" 125
check "zero quota: message names it" contains "$ERR" "processes"
check "zero quota: nothing ran" test ! -e "$ws/zero-ran"

# File size: RLIMIT_FSIZE, everywhere.
run_cli -p "$pol/fsize.lua" -w "$ws" -c 'head -c 3000000 /dev/zero > big; echo "rc=$?"'
check "file-size limit stops the write" test "$(stat -c %s "$ws/big")" -le 1048576
rm -f "$ws/big"

if [ "$can_pids" = True ] && [ "$can_mem" = True ]; then
  # Fork bomb under a process limit: the run ends, the host stays responsive. The bound
  # holds on a loaded machine: the 10 s deadline (the bomb can starve the command's own
  # `sleep` of a pid until then) + 5x a plain run with the same policy, measured just
  # before (it slows down with the machine) + 10 s (killing the bombing tree took 2 s
  # under load); a tree that no kill ends would keep forking until ctest's timeout.
  start=$(date +%s%N)
  "$A3S" -p "$pol/procs.lua" -w "$ws" -c true >/dev/null 2>&1 </dev/null
  bound=$((10000 + 5 * ($(date +%s%N) - start) / 1000000 + 10000))
  start=$(date +%s%N)
  run_cli -p "$pol/procs.lua" -w "$ws" --json -t 10 -c 'bomb() { bomb | bomb & }; bomb; sleep 2; echo bomb-done'
  remember_id
  took=$(( ($(date +%s%N) - start) / 1000000 ))
  check "fork bomb: the CLI returned (${took} ms < ${bound} ms)" test "$took" -lt "$bound"
  check "fork bomb: the process quota was hit and reported" contains "$OUT" '"resource":"processes"'
  check "fork bomb: the host still runs commands" eq "$(echo host-ok)" host-ok
  check "fork bomb: nothing of the tree survives" eq "$(pgrep -f 'bomb-done' | wc -l)" 0

  run_cli -p "$pol/procs.lua" -w "$ws" -t 30 -c 'for i in $(seq 1 64); do (sleep 5 &); done; wait; echo gate11-done'
  check "process limit: the loop finishes" contains "$OUT" gate11-done
  check "process limit: forks were refused" contains "$ERR" "Resource temporarily unavailable"

  # Memory hog under a memory limit: killed and reported.
  run_cli -p "$pol/mem.lua" -w "$ws" --json -t 20 -- python3 -c 'data = [bytearray(32 * 1024 * 1024) for _ in range(16)]; print(len(data))'
  remember_id
  check "memory hog: not timed out" contains "$OUT" '"timed_out":false'
  check "memory hog: did not complete" not_contains "$OUT" '"stdout":"16'
  check "memory hog: the OOM kill is reported" contains "$OUT" '"resource":"memory"'

  # CPU quota: a busy loop gets about a fifth of a CPU.
  run_cli -p "$pol/cpu.lua" -w "$ws" -- python3 -c '
import time
w, c = time.time(), time.process_time()
while time.time() - w < 1.0: pass
print(round((time.process_time() - c) / (time.time() - w), 2))'
  echo "# cpu share measured under cpu_millicores=200: $OUT"
  check "cpu quota: the busy loop got at most ~0.35 of a CPU ($OUT)" python3 -c "import sys; sys.exit(0 if float('$OUT') <= 0.35 else 1)"

  check "every per-run cgroup was removed (${#ids[@]} runs checked)" eq "$(our_cgroups)" 0

  # Fail closed when the cgroup root is not usable.
  ro=$(tmpdir)
  chmod 0555 "$ro"
  A3S_SANDBOX_CGROUP_ROOT="$ro" run_cli -p "$pol/mem.lua" -w "$ws" -c "touch $ws/ro-ran"
  check "unusable cgroup root: refused with 125" eq "$RC" 125
  check "unusable cgroup root: message names the memory quota" contains "$ERR" "memory"
  check "unusable cgroup root: nothing ran" test ! -e "$ws/ro-ran"
else
  # This caller cannot write any cgroup: a quota policy must be refused, never weakened.
  run_cli -p "$pol/mem.lua" -w "$ws" -c "touch $ws/mem-ran"
  check "no writable cgroup: memory quota refused with 125" eq "$RC" 125
  check "no writable cgroup: the message says why" contains "$ERR" "memory"
  check "no writable cgroup: nothing ran" test ! -e "$ws/mem-ran"
  run_cli -p "$pol/procs.lua" -w "$ws" -c "touch $ws/procs-ran"
  check "no writable cgroup: process quota refused with 125" eq "$RC" 125
  check "no writable cgroup: nothing ran (processes)" test ! -e "$ws/procs-ran"
fi

# Audit trail: attributable events, no secret value.
audit=$(tmpdir)/audit.jsonl
canary="audit-canary-$RANDOM$RANDOM"
run_cli -w "$ws" --json --audit "$audit" -e "API_TOKEN=$canary" -t 0.2 -c 'sleep 3'
id=$(echo "$OUT" | python3 -c 'import json,sys; print(json.load(sys.stdin)["execution_id"])')
check "result carries an execution id" test "${#id}" -eq 32
check "audit file written" test -s "$audit"
check "every audit line is JSON with the execution id, digest and backend" python3 - "$audit" "$id" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "no events"
for l in lines:
    e = json.loads(l)
    assert e["execution_id"] == sys.argv[2], e
    assert len(e["policy_digest"]) == 64 and e["backend"] == "linux-bwrap", e
events = [(json.loads(l)["event"], json.loads(l)["decision"]) for l in lines]
assert ("compile", "allow") in events and ("network", "deny") in events, events
assert ("process", "deny") in events, events
PY
check "the secret value never reaches the audit trail" not_contains "$(cat "$audit")" "$canary"
run_cli -w "$ws" --audit /proc/self/nonexistent/x -- true
check "an unusable audit file refuses the run" eq "$RC" 125
finish
