#!/usr/bin/env bash
# Placeholders kept between runs: the last run of a workspace moves its untouched
# placeholders (the protected names it pinned, .git, .bashrc, ...) into the per-user state
# directory, and the next run of the same workspace moves them back instead of creating
# new ones. The attack: a descriptor opened on a placeholder while a run held it (a host
# process, or a concurrent run whose policy does not protect the name) writes into it once
# the run is over, a hook into .git, a line into .bashrc. The next run must not show that
# content, and must leave nothing in the workspace; another workspace never gets a
# placeholder kept for this one.
source "$(dirname "$0")/lib.sh"
require_sandbox

W=$(tmpdir)
W2=$(tmpdir)
show='stat -c %i .git; ls -A .git | wc -l; stat -c %s .bashrc'

run_cli -w "$W" -c "$show"
check "first run (rc $RC: ${ERR:0:200})" eq "$RC" 0
first=$(echo "$OUT" | head -1)
check "first run: an empty .git and an empty .bashrc" eq "$(echo "$OUT" | tail -2 | tr '\n' ' ')" "0 0 "
check "first run: nothing left in the workspace" eq "$(ls -A "$W")" ""
state=/tmp/a3s-sandbox-state-$(id -u)
check "first run: its .git is kept in the state directory" \
  test -n "$(find "$state" -maxdepth 1 -inum "$first" -name 'ws-*.keep-*' 2>/dev/null)"
run_cli -w "$W" -c "$show"
check "second run: the same .git inode, kept between the runs" eq "$(echo "$OUT" | head -1)" "$first"
check "second run: still empty" eq "$(echo "$OUT" | tail -2 | tr '\n' ' ')" "0 0 "
check "second run: nothing left in the workspace" eq "$(ls -A "$W")" ""
run_cli -w "$W2" -c "$show"
check "another workspace: its own .git (not $first)" test "$(echo "$OUT" | head -1)" != "$first"
check "another workspace: nothing left" eq "$(ls -A "$W2")" ""

# Descriptors opened during a run, written after it.
res=$(python3 - "$W" "$A3S" <<'PY'
import os, subprocess, sys, time
W, cli = sys.argv[1], sys.argv[2]
p = subprocess.Popen([cli, "-w", W, "--", "sleep", "2"], stdin=subprocess.DEVNULL)
for _ in range(500):
    if os.path.isdir(W + "/.git") and os.path.isfile(W + "/.bashrc"):
        break
    time.sleep(0.01)
d = os.open(W + "/.git", os.O_RDONLY | os.O_DIRECTORY)
f = os.open(W + "/.bashrc", os.O_RDWR)
p.wait()
left = len(os.listdir(W))
try:  # fails only where the directory was removed, not kept
    os.mkdir("hooks", 0o755, dir_fd=d)
    h = os.open("hooks/post-checkout", os.O_WRONLY | os.O_CREAT, 0o755, dir_fd=d)
    os.write(h, b"#!/bin/sh\necho planted\n")
    os.close(h)
except FileNotFoundError:
    pass
os.write(f, b"echo planted\n")
print(p.returncode, left)
PY
)
check "the holder's run ended (rc, entries left: $res)" eq "$res" "0 0"
run_cli -w "$W" -c "ls -A .git; cat .bashrc; echo end"
check "the next run (rc $RC: ${ERR:0:200})" eq "$RC" 0
check "the next run: .git is empty and .bashrc too, nothing planted shows" eq "$OUT" "end"
check "after it: nothing in the workspace" eq "$(ls -A "$W")" ""
run_cli -w "$W" -c "ls -A .git; cat .bashrc; echo end"
check "and the run after that: still nothing planted" eq "$OUT" "end"
check "and nothing in the workspace" eq "$(ls -A "$W")" ""
finish
