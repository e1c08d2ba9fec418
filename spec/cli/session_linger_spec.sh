#!/usr/bin/env bash
# A session's command answers first and releases its run right after (README
# "Sessions"): its scratch dir, its run record and its mounts. Never later than that: a
# reader that does not read the --json result must not keep the run, nor the workspace
# root's mode a command changed, past the command's end. And what the workspace keeps of
# a run is restored before the answer comes. As the caller and as the unprivileged user.
source "$(dirname "$0")/lib.sh"
require_sandbox
A3S=${A3S_SESSION_REAL_CLI:-$A3S}

ws=$(tmpdir)
chmod 0755 "$ws"
# The session's scratch dirs (a3s-sandbox- and 12 random characters) are made in a
# TMPDIR of its own: other specs' runs may make theirs meanwhile.
sess_tmp=$(tmpdir)
scratch_dirs() {
  find "$sess_tmp" -maxdepth 1 -type d -regextype posix-extended \
    -regex '.*/a3s-sandbox-[A-Za-z0-9]{12}' 2>/dev/null | wc -l
}
id=$(TMPDIR=$sess_tmp "$A3S" session start -w "$ws")
sleep 0.2
idle=$(scratch_dirs) # the session's own and the idle worker's, made ahead

# The command opens the workspace root to everyone and writes 200 kB (a --json result
# larger than a pipe holds); its reader waits 5 s before it reads anything.
out=$(tmpdir)
{ "$A3S" session exec "$id" --json -- sh -c 'chmod 777 .; : >ran; head -c 200000 /dev/zero | tr "\0" a' \
    2>/dev/null | { sleep 5; wc -c >"$out/count"; }; } &
client=$!
for _ in $(seq 100); do [ -e "$ws/ran" ] && break; sleep 0.05; done
sleep 1 # the command has ended; its result waits for the reader
check "the command ran" test -e "$ws/ran"
check "while the result waits for its reader: the workspace root's mode is restored ($(stat -c %a "$ws"))" \
  eq "$(stat -c %a "$ws")" 755
# (The command took the idle worker's; no other idle one is made while it is served.)
check "... and its scratch dir is gone ($(scratch_dirs), $idle before it)" \
  test "$(scratch_dirs)" -lt "$idle"
wait $client
check "... and the reader gets the whole result once it reads ($(cat "$out/count"))" \
  test "$(cat "$out/count")" -gt 100000

# A quiet command (nothing written after it): the answer comes with the workspace as a
# run leaves it (the rest is released right after).
rm -f "$ws/ran"
run_cli session exec "$id" -- sh -c 'chmod 777 .'
check "a quiet command: the root's mode restored when the answer comes ($(stat -c %a "$ws"))" \
  eq "$(stat -c %a "$ws")/$RC" 755/0

# A stop while a result waits for a reader that never reads: the stop ends the worker
# (what it had left to write is given up) instead of waiting for the reader.
rm -f "$ws/ran"
{ "$A3S" session exec "$id" --json -- sh -c ': >ran; head -c 300000 /dev/zero | tr "\0" b' \
    2>/dev/null | { sleep 60 & echo $! >"$out/reader"; wait; }; } &
for _ in $(seq 100); do [ -e "$ws/ran" ] && break; sleep 0.05; done
sleep 0.5
"$A3S" session stop "$id" >"$out/stop" 2>&1
stop_rc=$?
check "a stop while the result waits for a reader that never reads: it ends ($stop_rc: $(cat "$out/stop"))" \
  eq "$stop_rc/$(cat "$out/stop")" "0/"
kill "$(cat "$out/reader")" 2>/dev/null
wait 2>/dev/null
sleep 0.2
check "after stop: no scratch dir is left ($(scratch_dirs))" eq "$(scratch_dirs)" 0
finish
