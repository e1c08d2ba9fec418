#!/usr/bin/env bash
# Fault injection: the CLI is SIGKILLed at many deterministic points of setup and run
# (strace delivers SIGKILL on entry to the Nth call of one syscall, enumerated from a trace
# of an ordinary run), and at random moments; after each kill, one ordinary run. Then the
# workspace must be byte-identical to before the killed run (no placeholder, no temporary),
# and nothing of the killed run may remain on the host: no scratch dir, no run record, no
# pin record, no process.
#
# A3S_FAULT_POINTS (default 60) bounds how many syscall points are tried per mode: every
# call that makes or removes something on the host is always tried, the rest by stride.
. "$(dirname "$0")/lib.sh"
require_sandbox
command -v strace >/dev/null || skip_all "strace is not installed (scripts/setup.sh installs it)"

# A private temp dir: this run's scratch dirs are told apart from concurrent specs'.
TMPDIR=$(tmpdir)
export TMPDIR
ws=$(tmpdir)
mkdir -p "$ws/src/deep" "$ws/.git/hooks"
printf 'int main(void){return 0;}\n' >"$ws/src/main.c"
printf 'ref: refs/heads/main\n' >"$ws/.git/HEAD"
printf 'data\n' >"$ws/src/deep/file"
state=/tmp/a3s-sandbox-state-$(id -u)
marker=a3s-fault-$$-$RANDOM # in the killed runs' command line, to find it afterwards
cmd="sleep 0.3; : $marker"

# Names, types, modes, sizes, link targets and contents of everything in the workspace.
snapshot() {
  (cd "$ws" && find . -printf '%p|%y|%m|%s|%l\n' | LC_ALL=C sort &&
    find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
}
before=$(snapshot)

ws_key() { printf 'ws-%x-%x' "$(stat -c %d "$ws")" "$(stat -c %i "$ws")"; }

# Host side after the ordinary run that follows a kill. Echoes what is wrong, if anything.
leftovers() {
  local what=""
  [ "$(snapshot)" = "$before" ] || what+="workspace changed: $(diff <(echo "$before") <(snapshot) | head -5 | tr '\n' ' '); "
  local s; s=$(ls -d "$TMPDIR"/a3s-sandbox-* 2>/dev/null)
  [ -z "$s" ] || what+="scratch dirs left: $s; "
  local r; r=$(grep -l "$TMPDIR/" "$state"/run-* 2>/dev/null)
  [ -z "$r" ] || what+="run records left: $r; "
  [ ! -e "$state/$(ws_key).pins" ] || what+="pin record left; "
  # Any process of the killed run: its command carries the marker on its command line
  # (other specs' processes never do), and so do its bwrap and launcher when they were
  # started for it.
  local p; p=$(pgrep -f "$marker" | tr '\n' ' ')
  [ -z "$p" ] || what+="processes of the killed run left: $p($(ps -o comm= -p "${p%% *}")); "
  # A sandbox started ahead, before the command was known (backends/linux/ahead.h), has
  # no marker: its bubblewrap is the one started in this workspace (its launcher dies
  # with it). The workspace is this spec's alone.
  local b q; b=""
  for q in $(pgrep -x bwrap); do
    [ "$(readlink "/proc/$q/cwd" 2>/dev/null)" = "$(cd "$ws" && pwd -P)" ] && b+="$q "
  done
  [ -z "$b" ] || what+="a sandbox started ahead left: $b; "
  echo "$what"
}

# After the ordinary run. Processes only: bubblewrap killed inside clone() can still make
# the sandbox's first process after that run's sweep looked; the sweeps that follow look
# again for a while (tombs, see engine/stale.c), so one more ordinary run must end it.
# Everything else must hold after the first run.
checked_leftovers() {
  local l; l=$(leftovers)
  case "$l" in
    ''|*"workspace changed"*|*"scratch dirs"*|*"records left"*|*"pin record"*) echo "$l"; return ;;
  esac
  "$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
  settle
  leftovers
}

# The PDEATHSIG'd children of a killed CLI die asynchronously: give them a moment, but
# never assume how long (the check after the ordinary run is what counts).
settle() {
  local q
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    pgrep -f "$marker" >/dev/null && { sleep 0.05; continue; }
    for q in $(pgrep -x bwrap); do
      [ "$(readlink "/proc/$q/cwd" 2>/dev/null)" = "$(cd "$ws" && pwd -P)" ] && { sleep 0.05; continue 2; }
    done
    return 0
  done
}

# --- enumerate the kill points from one traced ordinary run ---------------------------
trace=$(mktemp "$TMPDIR/trace.XXXXXX")
strace -qq -o "$trace" "$A3S" -w "$ws" -c "$cmd" >/dev/null 2>&1 </dev/null
check "an ordinary traced run leaves the workspace as it was" eq "$(leftovers)" ""
# syscall name of every line, then "name k" for its k-th call
mapfile -t points < <(sed -n 's/^\([a-z0-9_]*\)(.*/\1/p' "$trace" |
  awk '{ n[$1]++; print $1, n[$1] }')
rm -f "$trace"
check "the trace lists the CLI's syscalls (${#points[@]})" test "${#points[@]}" -gt 100

max=${A3S_FAULT_POINTS:-60}
always='^(mkdir|mkdirat|rmdir|unlink|unlinkat|rename|renameat|renameat2|ftruncate|pwrite64|clone|clone3|fork|vfork|pidfd_open|open_tree|move_mount|mount_setattr|memfd_create|socketpair|pwrite|execve) '
stride=$(( (${#points[@]} + max - 1) / max ))
selected=()
for i in "${!points[@]}"; do
  p=${points[$i]}
  if [[ "$p " =~ $always ]] || [ $((i % stride)) -eq 0 ]; then selected+=("$p"); fi
done
echo "# ${#points[@]} syscalls in an ordinary run; killing at ${#selected[@]} of them"

bad=0 tried=0 first=""
for p in "${selected[@]}"; do
  name=${p% *} k=${p#* }
  # (strace reports the kill on stderr as its own death: silenced)
  (strace -qq -o /dev/null -e trace="$name" -e inject="$name:signal=KILL:when=$k" \
    "$A3S" -w "$ws" -c "$cmd" >/dev/null 2>&1 </dev/null; true) 2>/dev/null
  settle
  "$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
  tried=$((tried + 1))
  l=$(checked_leftovers)
  if [ -n "$l" ]; then
    bad=$((bad + 1))
    [ -n "$first" ] || first="killed at call $k of $name: $l"
    # Start the next point from a clean state, so one failure is not counted many times.
    pkill -KILL -f "$marker" 2>/dev/null
    "$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
  fi
done
check "SIGKILL at $tried syscall points, then one run: nothing left ($bad bad; first: ${first:-none})" \
  eq "$bad" 0

# --- random moments, the command running or not ---------------------------------------
bad=0 first=""
for i in $(seq 1 40); do
  "$A3S" -w "$ws" -c "$cmd" >/dev/null 2>&1 </dev/null &
  pid=$!
  sleep "0.0$((RANDOM % 60 + 1))"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  settle
  "$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
  l=$(checked_leftovers)
  if [ -n "$l" ]; then
    bad=$((bad + 1)); [ -n "$first" ] || first="$l"
    pkill -KILL -f "$marker" 2>/dev/null
    "$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
  fi
done
check "SIGKILL at 40 random moments, then one run: nothing left ($bad bad; first: ${first:-none})" \
  eq "$bad" 0

# --- a refused run under a tiny fd limit leaks nothing -----------------------------------
# (checked right after each: such a run must clean up itself, not leave it to a sweep)
bad=""
for n in 6 7 8 9 10 11 12 14 16 20; do
  (ulimit -n "$n"; exec "$A3S" -w "$ws" -- true) >/dev/null 2>&1 </dev/null
  l=$(leftovers)
  [ -z "$l" ] || bad+="ulimit -n $n: $l "
done
check "runs under ulimit -n 6..20 leave nothing behind themselves" eq "$bad" ""
# --- a forged record reaches no other process -------------------------------------------
# (the state dir is the user's own; a record that got there anyway, e.g. through a bind
# mount that aliased it into a workspace, must not make a sweep kill a host process)
sleep 300 &
victim=$!
start=$(awk '{ sub(/^.*\) /, ""); print $20 }' "/proc/$victim/stat")
tag=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'proc %s %s\n' "$victim" "$start" >"$state/run-$tag"
printf 'x' >"$state/run-not-a-tag"
"$A3S" -w "$ws" -- true >/dev/null 2>&1 </dev/null
check "a forged record naming a host process (pid and start time right) does not kill it" \
  kill -0 "$victim"
kill "$victim" 2>/dev/null; wait "$victim" 2>/dev/null
rm -f "$state/run-$tag" "$state/tomb-$tag" "$state/run-not-a-tag"
finish
