#!/usr/bin/env bash
# The workspace root's mode is restored after a command made it 0777: also when the CLI
# was killed (the next run restores it), and when two runs overlap (the last one to end
# restores what the first one saw, not the 0777 the second one found).
. "$(dirname "$0")/lib.sh"
require_sandbox

# Waits until the file exists (the command got that far), at most about 20 s.
wait_for() { for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.1; done; return 1; }

# --- a killed CLI ----------------------------------------------------------------------------
ws=$(tmpdir)
chmod 0755 "$ws"
"$A3S" -w "$ws" -t 60 -c 'chmod 0777 . && touch opened && sleep 100' >/dev/null 2>&1 </dev/null &
cli=$!
check "killed run: the command made the root 0777" wait_for "$ws/opened"
check "killed run: 0777 while it runs" eq "$(stat -c %a "$ws")" 777
{ kill -KILL "$cli"; wait "$cli"; } 2>/dev/null
"$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
check "after the next run the root is 0755 again" eq "$(stat -c %a "$ws")" 755

# --- two overlapping runs ----------------------------------------------------------------------
ws=$(tmpdir)
chmod 0755 "$ws"
"$A3S" -w "$ws" -t 60 -c 'chmod 0777 . && touch a-opened && while [ ! -e b-started ]; do sleep 0.05; done' \
  >/dev/null 2>&1 </dev/null &
a=$!
wait_for "$ws/a-opened"
"$A3S" -w "$ws" -t 60 -c 'touch b-started; while [ ! -e a-ended ]; do sleep 0.05; done' \
  >/dev/null 2>&1 </dev/null &
b=$!
wait "$a"
check "overlap: A's end restores the root although B still runs" \
  eq "$(stat -c %a "$ws")" 755
touch "$ws/a-ended"
wait "$b"
check "overlap: after both ended the root is 0755 (what the first run saw)" \
  eq "$(stat -c %a "$ws")" 755
# --- the owner tightens the mode while a run goes on: that stays ------------------------------
ws=$(tmpdir)
chmod 0755 "$ws"
"$A3S" -w "$ws" -t 60 -c 'touch started; while [ ! -e go ]; do sleep 0.05; done' \
  >/dev/null 2>&1 </dev/null &
a=$!
wait_for "$ws/started"
chmod 0700 "$ws"
touch "$ws/go"
wait "$a"
check "the owner's chmod 700 during a run is not undone (restores only narrow)" \
  eq "$(stat -c %a "$ws")" 700
# --- a holder that never lets go of the workspace's mutex ------------------------------------
# A run stopped (SIGSTOP) while it holds the mutex, here a read lock the spec takes on it
# as a run's scan does. The release of the run that made the root 0777 gives up on the
# mutex after about 10 s: its pins stay for a later sweep, but the root's mode must be
# restored all the same.
ws=$(tmpdir)
chmod 0755 "$ws"
state="/tmp/a3s-sandbox-state-$(id -u)"
python3 - "$ws" "$state" <<'PY' &
import fcntl, os, sys, time
ws, state = sys.argv[1:3]
for _ in range(400):  # the command runs: its run holds the workspace
    if os.path.exists(os.path.join(ws, "opened")):
        break
    time.sleep(0.05)
st = os.stat(ws)
fd = os.open(f"{state}/ws-{st.st_dev:x}-{st.st_ino:x}.lock", os.O_RDONLY)
fcntl.lockf(fd, fcntl.LOCK_SH, 1, 0)  # the mutex byte, read-locked until killed
open(os.path.join(ws, "locked"), "w").close()  # the command may end now
time.sleep(120)
PY
holder=$!
"$A3S" -w "$ws" -t 60 -c 'chmod 0777 . && touch opened && while [ ! -e locked ]; do sleep 0.05; done' \
  >/dev/null 2>&1 </dev/null
rc=$?
check "stuck mutex: the run itself succeeded" eq "$rc" 0
check "stuck mutex: the root is 0755 again when the run returns" eq "$(stat -c %a "$ws")" 755
{ kill "$holder"; wait "$holder"; } 2>/dev/null
"$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
check "stuck mutex: the next run removes the pins left behind" \
  eq "$(ls -A "$ws" | grep -v -e '^opened$' -e '^locked$')" ""

finish
