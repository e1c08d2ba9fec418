#!/usr/bin/env bash
# The host side of a mediated run is the program a3s-sandbox-mediator, never a fork of the
# CLI that goes on running its code (in a multithreaded host such a copy could hang on a
# lock another thread held). Checked on the host: during a run the CLI's mediator child is
# that executable with its argv, not dumpable, with /dev/null on 0..2, no environment but
# the resolver's two variables, no signal ignored or blocked that the caller had; every
# child the CLI creates calls execve first (strace); a SIGKILLed CLI leaves nothing
# running; a missing, misplaced or failing mediator refuses a granted run with 125 before
# anything runs, and capabilities say mediation is unavailable.
source "$(dirname "$0")/lib.sh"
require_sandbox

# This spec is about the mediator given by path (the embedded one: helpers_spec.sh).
med=${A3S_SANDBOX_MEDIATOR:-$(dirname "$A3S")/a3s-sandbox-mediator}
export A3S_SANDBOX_MEDIATOR=$med
med_real=$(readlink -f "$med")
ws=$(tmpdir)
state=$(tmpdir)
grant=(--grant a3s-probe.invalid:1)

# "PID STARTTIME" of every descendant of $1 (the sandbox's processes included).
cat >"$state/tree.py" <<'PY'
import os, sys
procs = {}
for p in os.listdir("/proc"):
    if not p.isdigit():
        continue
    try:
        f = open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()
    except OSError:
        continue
    procs[int(p)] = (int(f[1]), f[19], f[0])  # ppid, starttime, state
queue, seen = [int(sys.argv[1])], []
while queue:
    parent = queue.pop()
    for pid, (ppid, start, _) in procs.items():
        if ppid == parent:
            seen.append("%d %s" % (pid, start))
            queue.append(pid)
print("\n".join(seen))
PY
# true while PID (with that start time) exists and is not a zombie
alive() {
  local f
  f=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  f=${f##*) }
  set -- "$1" "$2" $f
  [ "$3" != Z ] && [ "${22}" = "$2" ]
}
# the CLI's child running as a3s-sandbox-med (its comm), waiting up to 10 s for it
mediator_of() {
  local i p
  for i in $(seq 200); do
    p=$(pgrep -P "$1" -x a3s-sandbox-med) && { echo "$p"; return 0; }
    sleep 0.05
  done
  return 1
}
# The caller blocks and ignores signals before it starts the CLI: none of that may reach
# the mediator (the library spawns it with the mask empty and every signal default).
cat >"$state/launch.py" <<'PY'
import os, signal, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGHUP, signal.SIGTERM})
for s in (signal.SIGINT, signal.SIGUSR2, signal.SIGQUIT, signal.SIGALRM):
    signal.signal(s, signal.SIG_IGN)
os.execv(sys.argv[1], sys.argv[1:])
PY

# --- during a run: the mediator process --------------------------------------------
env SECRET_TOKEN=s3cret LOCALDOMAIN=example.test RES_OPTIONS=attempts:2 \
  HOSTALIASES=/etc/hostname LD_LIBRARY_PATH=/nonexistent \
  python3 "$state/launch.py" "$A3S" -w "$ws" "${grant[@]}" -- sleep 60 >/dev/null 2>&1 &
cli=$!
mpid=$(mediator_of "$cli")
check "during a mediated run the CLI has a child a3s-sandbox-mediator" test -n "$mpid"
mpid=${mpid:-none}
check "its argv: the mediator, --parent-pid CLI, the grant as HOST PORT" \
  eq "$(tr '\0' ' ' <"/proc/$mpid/cmdline" 2>/dev/null)" \
  "$med_real --parent-pid $cli --grant a3s-probe.invalid 1 "
if [ "${A3S_UNPRIV:-0}" = 1 ]; then
  # Its own user cannot look into it: not dumpable (the CLI, dumpable, stays readable).
  check "the CLI's executable is readable to its user" test -n "$(readlink "/proc/$cli/exe")"
  check "the mediator's is not: it is not dumpable" \
    eq "$(readlink "/proc/$mpid/exe" 2>/dev/null || echo refused)" refused
  check "its /proc files belong to root (not dumpable)" eq "$(stat -c %u "/proc/$mpid/status")" 0
else
  check "/proc/<pid>/exe of the CLI's child is a3s-sandbox-mediator" \
    eq "$(readlink "/proc/$mpid/exe")" "$med_real"
  check "its fds 0..2 are /dev/null, not the CLI's streams" \
    eq "$(readlink "/proc/$mpid/fd/0") $(readlink "/proc/$mpid/fd/1") $(readlink "/proc/$mpid/fd/2")" \
    "/dev/null /dev/null /dev/null"
  check "its environment: the resolver's LOCALDOMAIN and RES_OPTIONS, nothing else" \
    eq "$(tr '\0' ' ' <"/proc/$mpid/environ")" "LOCALDOMAIN=example.test RES_OPTIONS=attempts:2 "
fi
sig() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$mpid/status" 2>/dev/null; }
ign=$(sig SigIgn) blk=$(sig SigBlk)
# The classic signals (1..31); glibc's own internal ones are left out.
check "it ignores SIGPIPE and no other signal the caller ignored" \
  eq "$(( 16#${ign:-ffff} & 0x7fffffff ))" "$(( 1 << 12 ))"
check "it blocks nothing the caller blocked (SIGPIPE at most)" \
  eq "$(( 16#${blk:-ffff} & 0x7fffffff & ~(1 << 12) ))" 0

# --- the CLI SIGKILLed: the mediator and the sandbox die with it ---------------------
tree=$(python3 "$state/tree.py" "$cli")
check "the run's tree holds the mediator" grep -qx "$mpid [0-9]*" <<<"$tree"
kill -KILL "$cli"
wait "$cli" 2>/dev/null
left=$tree
for _ in $(seq 100); do
  left=$(while read -r p s; do [ -n "$p" ] && alive "$p" "$s" && echo "$p"; done <<<"$tree")
  [ -z "$left" ] && break
  sleep 0.05
done
check "after a SIGKILL of the CLI nothing of the run is left running" eq "$left" ""

# --- every child of the CLI execs first ----------------------------------------------
if command -v strace >/dev/null; then
  # (Under a sanitizer build, LeakSanitizer's exit-time helper cannot work under ptrace.)
  ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -s 256 -o "$state/trace" -e trace=process "$A3S" -w "$ws" "${grant[@]}" -c \
    'exec 3<>/dev/tcp/127.0.0.1/24731 && printf "CONNECT nope.example:1 HTTP/1.1\r\n\r\n" >&3 && head -c 12 <&3' \
    >"$state/trace.out" 2>&1 </dev/null
  check "a traced mediated run works" contains "$(cat "$state/trace.out")" "HTTP/1.1 403"
  verdict=$(python3 - "$state/trace" <<'PY'
import re, sys
lines = [l.rstrip("\n") for l in open(sys.argv[1])]
ev = [(int(m.group(1)), m.group(2)) for m in (re.match(r"(\d+) +(.*)", l) for l in lines) if m]
cli = ev[0][0]
kids, pending = [], {}
for pid, text in ev:
    if pid != cli:
        continue
    m = re.match(r"(clone3?|fork|vfork)\((.*)", text)
    if m:
        r = re.search(r"\) += (\d+)$", text)
        if r:
            kids.append((int(r.group(1)), text))
        else:
            pending[m.group(1)] = text
        continue
    m = re.match(r"<\.\.\. (clone3?|fork|vfork) resumed>.*= (\d+)$", text)
    if m and m.group(1) in pending:
        kids.append((int(m.group(2)), pending.pop(m.group(1))))
out = []
for kid, how in kids:
    if "CLONE_THREAD" in how:
        continue
    calls = [re.match(r"(?:<\.\.\. )?(\w+)", t).group(1) for p, t in ev
             if p == kid and not t.startswith(("---", "+++"))]
    if "CLONE_NEWUSER" in how and set(calls) <= {"exit", "exit_group"}:
        out.append("holder")  # a user namespace held open, then exit: no library code
    elif calls and calls[0] == "execve":
        path = next(t for p, t in ev if p == kid and t.startswith("execve("))
        out.append("exec " + re.match(r'execve\("([^"]*)"', path).group(1))
    else:
        out.append("NO-EXEC %d: %s" % (kid, " ".join(calls[:5]) or "nothing traced"))
print("\n".join(out))
PY
)
  echo "$verdict" | sed 's/^/# child: /'
  check "every child the CLI creates calls execve first" not_contains "$verdict" NO-EXEC
  check "one of them is a3s-sandbox-mediator" contains "$verdict" "exec $med_real"
  check "another one is bubblewrap" contains "$verdict" "exec /usr/bin/bwrap"
else
  fail "strace is installed (scripts/setup.sh installs it)"
fi

# --- no usable mediator: a granted run is refused, nothing runs ------------------------
A3S_SANDBOX_MEDIATOR=/nonexistent/a3s-sandbox-mediator \
  run_cli -w "$ws" "${grant[@]}" -c "touch $ws/missing-ran"
check "missing mediator: a granted run exits 125" eq "$RC" 125
check "missing mediator: the message names A3S_SANDBOX_MEDIATOR" contains "$ERR" "A3S_SANDBOX_MEDIATOR"
check "missing mediator: ... and the program" contains "$ERR" "network grants need a3s-sandbox-mediator"
check "missing mediator: the command did not run" test ! -e "$ws/missing-ran"
A3S_SANDBOX_MEDIATOR=/nonexistent/a3s-sandbox-mediator run_cli -w "$ws" -c "echo no-grant-ok"
check "missing mediator: a run without grants still runs" eq "$RC:$OUT" "0:no-grant-ok"

cp "$med" "$ws/a3s-sandbox-mediator"
A3S_SANDBOX_MEDIATOR="$ws/a3s-sandbox-mediator" run_cli -w "$ws" "${grant[@]}" -c "touch $ws/inside-ran"
check "a mediator inside the workspace is refused (125)" eq "$RC" 125
check "... saying so" contains "$ERR" "inside the active workspace"
check "... and the command did not run" test ! -e "$ws/inside-ran"
rm -f "$ws/a3s-sandbox-mediator"

A3S_SANDBOX_MEDIATOR=/bin/false run_cli -w "$ws" "${grant[@]}" -c "touch $ws/failing-ran"
check "a mediator that exits at once: 125" eq "$RC" 125
check "... the message says it could not start" contains "$ERR" "could not start (exit status 1)"
check "... and the command did not run" test ! -e "$ws/failing-ran"

caps() { python3 -c 'import json,sys; c=json.load(sys.stdin)["capabilities"]; print(c["mediated_http"], c["mediated_socks"])' <<<"$OUT"; }
A3S_SANDBOX_MEDIATOR=/nonexistent/a3s-sandbox-mediator run_cli capabilities -w "$ws"
check "capabilities without the mediator: mediation unavailable" eq "$(caps)" "False False"
run_cli capabilities -w "$ws"
check "capabilities with it: mediation available" eq "$(caps)" "True True"
finish
