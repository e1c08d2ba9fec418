#!/usr/bin/env bash
# A signal to the CLI (Ctrl-C, a supervisor's TERM) kills the sandboxed tree, releases
# the pins, removes the scratch dir, and exits 128+N: nothing is left behind.
source "$(dirname "$0")/lib.sh"
require_sandbox

for sig in INT TERM HUP; do
  ws=$(tmpdir)
  before=$(ls -A "$ws")
  "$A3S" -w "$ws" -c "echo \$HOME > scratch-path; sleep 0.6; touch $sig-leak" </dev/null >/dev/null 2>"$ws.err" &
  pid=$!
  for _ in $(seq 50); do [ -s "$ws/scratch-path" ] && break; sleep 0.02; done
  kill -s "$sig" "$pid"
  wait "$pid"
  rc=$?
  num=$(kill -l "$sig")
  check "SIG$sig: exit status 128+$num" eq "$rc" "$((128 + num))"
  check "SIG$sig: message on stderr" contains "$(cat "$ws.err")" "interrupted"
  sleep 0.8
  check "SIG$sig: the tree never ran on" test ! -e "$ws/$sig-leak"
  scratch=$(cat "$ws/scratch-path" 2>/dev/null)
  check "SIG$sig: the scratch dir was seen" test -n "$scratch"
  check "SIG$sig: the scratch dir is removed" test ! -e "$scratch"
  rm -f "$ws/scratch-path" "$ws.err"
  check "SIG$sig: no placeholder left in the workspace" eq "$(ls -A "$ws")" "$before"
done
finish
