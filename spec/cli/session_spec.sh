#!/usr/bin/env bash
# Sessions (README "Sessions"): one warm boundary, many commands. Each command must be
# what a fresh run is: its output, exit status and --json result; its own pid, mount and
# IPC namespaces, /tmp, /dev/shm and scratch dir; nothing of an earlier command alive or
# visible; the workspace rescanned, so what the host or an earlier command put there is
# protected in the next command. Stopping or killing the session leaves nothing behind.
# (The escape specs also run through sessions: ctest's *.session modes.)
source "$(dirname "$0")/lib.sh"
require_sandbox
# The real CLI, also in the session modes of the other specs.
A3S=${A3S_SESSION_REAL_CLI:-$A3S}

ws=$(tmpdir)
both() { printf '%s\n%s' "$OUT" "$ERR"; }
gone() { ! pgrep -f "$1" >/dev/null; }
is_id() { [[ "$1" =~ ^[0-9a-f]{16}$ ]] || { echo "#   not an id: '$1'"; return 1; }; }
# Until a process is gone, at most 5 s (the tree is killed at once; this is only the
# kernel reaping it).
gone_soon() { for _ in $(seq 50); do gone "$1" && return 0; sleep 0.1; done; echo "#   '$1' still runs"; return 1; }

id=$("$A3S" session start -w "$ws")
check "start: exit 0, one id of 16 hex digits" is_id "$id"
check "list shows the session" contains "$("$A3S" session list)" "$id pid="
ex() { run_cli session exec "$id" "$@"; }

# --- the same result as a fresh run ---------------------------------------------------
ex -c 'echo out; echo err >&2; exit 7'
s_rc=$RC s_out=$OUT s_err=$ERR
run_cli -w "$ws" -c 'echo out; echo err >&2; exit 7'
check "exit status as a fresh run's (7)" eq "$s_rc/$RC" "7/7"
check "stdout as a fresh run's" eq "$s_out" "$OUT"
check "stderr as a fresh run's" eq "$s_err" "$ERR"
ex --json -- sh -c 'echo j; echo k >&2; exit 3'
s_json=$OUT s_rc=$RC
run_cli -w "$ws" --json -- sh -c 'echo j; echo k >&2; exit 3'
same_json() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
for k in ("execution_id", "duration_ms"):
    a.pop(k, None); b.pop(k, None)
if a != b:
    print("#   session:", a); print("#   fresh:  ", b); sys.exit(1)
PY
}
check "--json: exit status 3" eq "$s_rc" 3
check "--json: the result object equals a fresh run's (but id and duration)" same_json "$s_json" "$OUT"
ex -- /nonexistent-program
check "a missing program: 127, as in a fresh run" eq "$RC" 127

# --- deadline and kill-the-tree -------------------------------------------------------
ex -t 1 -c 'sleep 3017 & sleep 3017'
check "-t 1: exit 124" eq "$RC" 124
check "-t 1: the deadline message" contains "$ERR" "timed out"
check "-t 1: no process of the tree is left" gone_soon "sleep 3017"

# --- pid 1 of a command: it waits without spinning, and reaps orphans --------------------
# (It once polled a closed fd: a whole core, for as long as the command ran.) Its CPU
# time over a second of the command's sleep is a few ticks at most, whatever the load.
ex -c 'sleep 1; set -- $(cut -d" " -f14,15 /proc/1/stat); echo $(($1 + $2))'
check "pid 1 waited, not spun: under 0.2 s of CPU in 1 s (got ${OUT:-?} ticks)" \
  test "${OUT:-999}" -lt "$(( $(getconf CLK_TCK) / 5 ))"
ex -c 'sh -c "sleep 0.2 & exit 0"; sleep 1.5; grep -l "^[0-9]* ([^)]*) Z" /proc/[0-9]*/stat | wc -l'
check "an orphan that exited was reaped by pid 1 (no zombie left)" eq "$OUT" 0

# --- a background process never outlives its command, nor is seen by the next one -------
ex -c 'setsid sleep 3018 </dev/null >/dev/null 2>&1 & nohup sleep 3018 >/dev/null 2>&1 & echo started'
check "background: the command returned" eq "$OUT" started
check "background: nothing of it runs after the command" gone_soon "sleep 3018"
ex -c 'for p in /proc/[0-9]*; do tr "\0" " " <"$p/cmdline"; echo; done'
check "the next command sees no process of the last one" not_contains "$OUT" "sleep 3018"
check "the next command sees a handful of processes of its own" test "$(grep -c . <<<"$OUT")" -le 5
ex -c 'tr "\0" " " </proc/1/cmdline'
check "pid 1 is the command's own (the launcher that joined the session)" contains "$OUT" "--join"
ex -c 'grep -c " /proc" /proc/self/mountinfo; grep " /proc" /proc/self/mountinfo | grep -c " rw," || true'
check "every /proc mount a command has, also the session's below its own, is read-only" \
  eq "$(sed -n 2p <<<"$OUT")" 0
check "... and there are such mounts to look at" test "$(sed -n 1p <<<"$OUT")" -ge 2

# A client killed (SIGKILL) while its command runs: the worker kills the tree, and the
# next command starts only once that tree is gone, even one that takes long to die (50
# processes, each with 256 MiB of shared memory in its page tables) and holds a lock on
# a workspace file until its very end. The command after it finds the lock free.
rm -f "$ws/lockfile" "$ws/slow-out" "$ws/slow-pid"
# (In a subshell of its own, so the kill is not reported as a job's death.)
( "$A3S" session exec "$id" -c 'exec python3 -c "
import fcntl, mmap, os, time
lk = open(\"lockfile\", \"w\")
fcntl.flock(lk, fcntl.LOCK_EX | fcntl.LOCK_NB)
fd = os.memfd_create(\"slow\")
size = 256 << 20
os.ftruncate(fd, size)
r, w = os.pipe()
for _ in range(50):
    if os.fork() == 0:
        m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        os.write(w, b\"m\")
        time.sleep(600)
for _ in range(50):
    os.read(r, 1)
print(\"ready\", flush=True)
time.sleep(600)"' >"$ws/slow-out" 2>&1 </dev/null &
  echo $! >"$ws/slow-pid"
  wait ) 2>/dev/null &
slow_sub=$!
for _ in $(seq 600); do grep -q ready "$ws/slow-out" 2>/dev/null && break; sleep 0.05; done
check "killed client: its command's tree was up" contains "$(cat "$ws/slow-out")" ready
kill -9 "$(cat "$ws/slow-pid")"
wait "$slow_sub"
ex -c 'flock -n lockfile true && echo free || echo held'
check "killed client: the next command starts once that tree is gone (its lock is free)" \
  eq "$OUT" free
rm -f "$ws/lockfile" "$ws/slow-out" "$ws/slow-pid"

# --- a fresh /tmp, /dev/shm, scratch dir and IPC namespace per command -----------------
# /dev/shm is writable where a fresh run's is (bwrap's --dev: not for a root caller's
# mapped id); wherever it is, the next command must not see what was left there.
ex -c 'echo b >/dev/shm/left-by-one-2 2>/dev/null; echo a >/tmp/left-by-one-1 && echo c >"$TMPDIR/left-by-one-3" && ipcmk -M 4096 >/dev/null && echo wrote'
check "command 1 writes /tmp, its scratch dir and a SysV segment" eq "$OUT" wrote
ex -c 'echo "ipc=$(ipcs -m | grep -c 4096)"; echo x >/tmp/m4 && echo tmp-ok; ls -A /tmp /dev/shm "$TMPDIR"'
check "command 2: no file of command 1 in /tmp, /dev/shm or the scratch dir" \
  not_contains "$OUT" "left-by-one"
check "command 2: no SysV segment of command 1" contains "$OUT" "ipc=0"
check "command 2: its own /tmp is writable" contains "$OUT" "tmp-ok"
ex -c 'echo kept >kept.txt'
ex -c 'cat kept.txt'
check "the workspace is shared by the session's commands" eq "$OUT" kept

# --- the workspace is rescanned before each command -------------------------------------
canary="session-canary-$RANDOM$RANDOM"
printf '%s' "$canary" >"$ws/.env"
ex -c 'cat .env; cp .env leak.txt; cat leak.txt'
check "a secret the host made between commands: not readable" not_contains "$(both)" "$canary"
check "... and not copied out" test ! -s "$ws/leak.txt"
printf '%s' "$canary" >"$ws/.ENV.Local"
ex -c 'cat .ENV.Local'
check "a case variant the host made between commands: not readable" not_contains "$(both)" "$canary"
ex -c 'printf "%s" made-inside >.env.inside'
ex -c 'cat .env.inside'
check "a secret an earlier command made: masked in the next one" not_contains "$OUT" "made-inside"
mkdir -p "$ws/.git" && echo orig >"$ws/.git/config"
ex -c 'echo evil >.git/config; mkdir -p .git/hooks && echo hooked >.git/hooks/pre-commit'
check "a protected name the host filled between commands: read-only" eq "$(cat "$ws/.git/config")" orig
check "... no hook planted" test ! -e "$ws/.git/hooks/pre-commit"

# --- concurrent commands ----------------------------------------------------------------
out=$(tmpdir)
for i in 1 2 3 4; do
  ("$A3S" session exec "$id" -c "echo run-$i; sleep 0.3" >"$out/$i" 2>&1; echo $? >"$out/$i.rc") &
done
wait
for i in 1 2 3 4; do
  check "concurrent command $i: its own output, exit 0" eq "$(cat "$out/$i")/$(cat "$out/$i.rc")" "run-$i/0"
done

# --- the caller's terminal: never read by the session behind the user's back ---------------
# A client suspended with ^Z (or in the background) must not let the command read what
# the user types for the shell: the client relays its terminal itself, under job control.
tty_ws=$(tmpdir)
tty_id=$("$A3S" session start -w "$tty_ws")
python3 - "$A3S" "$tty_ws" "$tty_id" >"$out/tty" 2>&1 <<'PY'
import os, pty, select, sys, time
cli, ws, sid = sys.argv[1:4]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
def rd(t):
    out, end = b"", time.time() + t
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.05)
        if r:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out
rd(0.5)
os.write(fd, f"{cli} session exec {sid} -c 'cat > {ws}/captured.txt'\n".encode())
rd(1.5)
os.write(fd, b"typed-for-the-command\n"); rd(0.5)
os.write(fd, b"\x1a"); rd(1.0)
os.write(fd, b"echo SHELL-GOT-$((6*7))\n")
out = rd(1.5)
os.write(fd, b"kill %1; fg; exit\n"); rd(1.0)
print("shell-got-it" if b"SHELL-GOT-42" in out else "shell-got-nothing")
PY
check "^Z'd client: the shell gets what is typed next" contains "$(cat "$out/tty")" "shell-got-it"
check "^Z'd client: the command got only what was typed for it" \
  eq "$(cat "$tty_ws/captured.txt" 2>&1)" "typed-for-the-command"
"$A3S" session stop "$tty_id"

# --- a sandboxed command cannot use the session socket ---------------------------------------
# Even with the same uid, AF_UNIX allowed and the sessions directory exposed read-only by
# its policy: the supervisor serves only callers in its own user namespace.
run_dir=/run/user/$(id -u)
if [ -d "$run_dir" ] && [ ! -L "$run_dir" ] && [ "$(stat -c '%u %a' "$run_dir")" = "$(id -u) 700" ]; then
  sdir=$run_dir/a3s-sandbox-sessions
else
  sdir=/tmp/a3s-sandbox-sessions-$(id -u)
fi
hpol=$(tmpdir)
cat >"$hpol/unix.lua" <<LUA
local plan = a3s.extend("baseline", "unix")
plan:seccomp{ socket_families = { "AF_UNIX" } }
plan:read_only("$sdir")
return plan
LUA
chmod -R a+rX "$hpol"
cat >"$out/hijack.py" <<'PY'
import array, glob, json, socket, struct, sys
for p in glob.glob(sys.argv[1] + "/*.sock"):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p)
        req = json.dumps({"op": "exec", "command": "touch hijacked", "env": [],
                          "closed": [False, False, False]}).encode()
        s.sendmsg([struct.pack("=I", len(req))],
                  [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))])
        s.sendall(req)
        print("connected", p, "reply", s.recv(64))
    except OSError as e:
        print("refused", p, e)
PY
chmod a+r "$out/hijack.py" && chmod a+rx "$out"
victim=$(tmpdir)
vid=$("$A3S" session start -w "$victim")
hws=$(tmpdir)
cp "$out/hijack.py" "$hws/"
run_cli -p "$hpol/unix.lua" -w "$hws" -- python3 hijack.py "$sdir"
echo "# ${OUT:0:300}"
# (A root caller's command runs as the mapped id, which cannot even list root's directory.)
[ "$(id -u)" -eq 0 ] || check "the hijack ran and saw the victim's socket" contains "$OUT" "$vid.sock"
check "no command ran in the victim's session from inside a sandbox" test ! -e "$victim/hijacked"
check "... the supervisor gave the sandboxed peer no answer" not_contains "$OUT" "rc"
"$A3S" session stop "$vid"

# --- the policy is evaluated for the host as it is at each command -------------------------
if [ "$(id -u)" -eq 0 ]; then
  sib=/etc/shadow.a3s-spec-$$
  hid=$("$A3S" session start -w "$(tmpdir)")
  printf 'SHADOW-SIBLING-%s' $$ >"$sib" && chmod 644 "$sib"
  run_cli session exec "$hid" -c "cat $sib"
  rm -f "$sib"
  check "a host file the policy masks, made after the session opened: not readable" \
    not_contains "$OUT" "SHADOW-SIBLING"
  "$A3S" session stop "$hid"
fi

# --- a policy file the session's evaluation read, changed between commands --------------------
# The plan is reused only while everything its evaluation read holds: a module of the
# policy rewritten on the host applies to the next command.
mpol=$(tmpdir)
printf 'return function(plan, ctx) end\n' >"$mpol/sessparts.lua"
printf 'local plan = a3s.extend("baseline", "top")\nrequire("sessparts")(plan, ctx)\nreturn plan\n' \
  >"$mpol/top.lua"
chmod -R a+rX "$mpol"
mws=$(tmpdir)
mkdir "$mws/locked"
mid=$(A3S_SANDBOX_POLICY_PATH=$mpol "$A3S" session start -p "$mpol/top.lua" -w "$mws")
run_cli session exec "$mid" -c 'echo 1 > locked/one && echo wrote-1'
check "policy module, first version: locked/ is writable" eq "$OUT" wrote-1
printf 'return function(plan, ctx) plan:read_only(ctx.workspace .. "/locked") end\n' \
  >"$mpol/sessparts.lua"
run_cli session exec "$mid" -c 'echo 2 > locked/two && echo wrote-2'
check "policy module rewritten between commands: the command is refused (125)" eq "$RC" 125
check "... saying the policy changed" contains "$ERR" "start a new session"
check "... and nothing of it ran" test ! -e "$mws/locked/two"
"$A3S" session stop "$mid"

# A policy search directory re-pointed between commands: refused, never the old module.
sp=$(tmpdir)
mkdir "$sp/a" "$sp/b"
printf 'return function(plan, ctx) end\n' >"$sp/a/sessparts.lua"
printf 'return function(plan, ctx) plan:read_only(ctx.workspace .. "/locked") end\n' \
  >"$sp/b/sessparts.lua"
ln -s a "$sp/dir"
chmod -R a+rX "$sp"
mid=$(A3S_SANDBOX_POLICY_PATH=$sp/dir "$A3S" session start -p "$mpol/top.lua" -w "$mws")
ln -sfn b "$sp/dir"
run_cli session exec "$mid" -c 'echo 3 > locked/three && echo wrote-3'
check "a policy search directory re-pointed between commands: refused (125)" eq "$RC" 125
check "... nothing of it ran" test ! -e "$mws/locked/three"
"$A3S" session stop "$mid"

# A host fact that changes the seccomp filter: the command gets the new plan's filter.
printf 'local plan = a3s.extend("baseline", "sc")\nif a3s.host.exists("%s/lockdown") then plan:seccomp_deny({ "uname" }, "EPERM") end\nreturn plan\n' \
  "$mpol" >"$mpol/sc.lua"
chmod a+r "$mpol/sc.lua"
mid=$("$A3S" session start -p "$mpol/sc.lua" -w "$mws")
run_cli session exec "$mid" -- uname -s
check "seccomp from a host fact, before: uname works" eq "$OUT" Linux
touch "$mpol/lockdown"
run_cli session exec "$mid" -- uname -s
check "seccomp from a host fact made between commands: uname is denied as in a fresh run" \
  not_contains "$OUT" Linux
rm -f "$mpol/lockdown"
"$A3S" session stop "$mid"

# The client program inside the workspace: protected as a fresh run protects its own.
cws=$(tmpdir)
mkdir "$cws/tools"
cp "$A3S" "$cws/tools/a3s-sandbox"
chmod -R a+rX "$cws"
sum=$(sha256sum <"$cws/tools/a3s-sandbox")
cid=$("$A3S" session start -w "$cws")
out=$("$cws/tools/a3s-sandbox" session exec "$cid" -c \
  '{ echo evil > tools/a3s-sandbox; } 2>/dev/null && echo wrote; rm -f tools/a3s-sandbox 2>/dev/null && echo removed; mv tools t2 2>/dev/null && echo moved; true' 2>&1 </dev/null)
check "a client in the workspace: the command can neither write, remove nor move it" eq "$out" ""
check "... it is unchanged" eq "$(sha256sum <"$cws/tools/a3s-sandbox")" "$sum"
"$A3S" session stop "$cid"
# ... also run by a relative name from a subdirectory, the session started elsewhere.
mkdir "$cws/sub"
ln -s "$A3S" "$cws/sub/a3s"
cid=$(cd / && "$A3S" session start -w "$cws")
out=$(cd "$cws/sub" && ./a3s session exec "$cid" -c \
  'rm -f sub/a3s 2>/dev/null && echo removed; { echo evil > sub/a3s; } 2>/dev/null && echo wrote; true' 2>&1 </dev/null)
check "a client run as ./a3s from a subdirectory: its link cannot be replaced" eq "$out" ""
check "... it is still the link to the program" eq "$(readlink "$cws/sub/a3s")" "$A3S"
"$A3S" session stop "$cid"

# a3s-sandbox-exec: `session exec` as a program of its own, the same in every way.
EXEC=$(dirname "$A3S")/a3s-sandbox-exec
xid=$("$A3S" session start -w "$ws")
run_cli session exec "$xid" --json -e A=1 -- sh -c 'echo "j$A"; echo k >&2; exit 3'
c_json=$OUT c_rc=$RC
A3S=$EXEC run_cli "$xid" --json -e A=1 -- sh -c 'echo "j$A"; echo k >&2; exit 3'
check "a3s-sandbox-exec: the exit status of session exec ($c_rc)" eq "$RC" "$c_rc"
check "a3s-sandbox-exec: the same --json result" same_json "$OUT" "$c_json"
A3S=$EXEC run_cli "$xid" -t 0.2 -c 'sleep 5; echo late'
check "a3s-sandbox-exec: the deadline (124)" eq "$RC" 124
check "a3s-sandbox-exec: ... said so" contains "$ERR" "timed out"
A3S=$EXEC run_cli "$xid" -- printf '%s' $'\xff'
check "a3s-sandbox-exec: an argument that is not UTF-8 is refused (125)" eq "$RC" 125
check "a3s-sandbox-exec: ... said so" contains "$ERR" "UTF-8 only"
A3S=$EXEC run_cli 0000000000000000 --json -- true
check "a3s-sandbox-exec: no such session (125)" eq "$RC" 125
check "a3s-sandbox-exec: ... one JSON refusal on stdout" eq \
  "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"]["code"])' "$OUT")" setup
# --json as getopt reads it: abbreviated it counts, as -c's value or a program's word not.
for cl in "$EXEC $xid" "$A3S session exec $xid"; do
  read -r -a clv <<<"$cl"
  A3S=${clv[0]} run_cli "${clv[@]:1}" --jso -t 0 -c true
  check "${clv[0]##*/}: --jso refused with one JSON object on stdout" eq \
    "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["error"]["code"])' "$OUT" 2>&1)" usage
  A3S=${clv[0]} run_cli 0000000000000000 -c --json
  check "${clv[0]##*/}: '-c --json' (a command, not the option): no JSON on stdout" eq "$OUT" ""
done
{ "$EXEC" 0000000000000000 --json -- true 2>/dev/null; echo "rc=$?" >"$ws/x-rc"; } | true
check "a3s-sandbox-exec: a refusal's reader gone is 125, not a death by SIGPIPE" eq \
  "$(cat "$ws/x-rc")" "rc=125"
rm -f "$ws/x-rc"
# (1.6 MB of arguments, each byte written as \u0001 in the request: 9.6 MB.)
python3 -c '
import os, sys
os.execv(sys.argv[1], [sys.argv[1], sys.argv[2], "--", "true"] + ["\x01" * 100000] * 16)' \
  "$EXEC" "$xid" >/dev/null 2>"$ws/x-err"
check "a3s-sandbox-exec: a request over 8 MiB is refused (125) as such" eq \
  "$?:$(grep -c 'larger than a session takes' "$ws/x-err")" "125:1"
rm -f "$ws/x-err"
"$A3S" session stop "$xid"
# ... and inside the workspace, protected as the CLI is.
mkdir "$cws/bin"
cp "$EXEC" "$cws/bin/a3s-sandbox-exec"
chmod -R a+rX "$cws"
sum=$(sha256sum <"$cws/bin/a3s-sandbox-exec")
cid=$("$A3S" session start -w "$cws")
out=$("$cws/bin/a3s-sandbox-exec" "$cid" -c \
  '{ echo evil > bin/a3s-sandbox-exec; } 2>/dev/null && echo wrote; rm -f bin/a3s-sandbox-exec 2>/dev/null && echo removed; mv bin b2 2>/dev/null && echo moved; true' 2>&1 </dev/null)
check "a3s-sandbox-exec in the workspace: the command can neither write, remove nor move it" eq "$out" ""
check "... it is unchanged" eq "$(sha256sum <"$cws/bin/a3s-sandbox-exec")" "$sum"
# ... a link to it, found by the shell through an empty PATH entry (a trailing ':', the
# current directory) or a '~' entry, is protected too.
ln -s "$EXEC" "$cws/sx"
mkdir "$cws/tools" 2>/dev/null
ln -s "$EXEC" "$cws/tools/sx2"
out=$(cd "$cws" && PATH=/usr/bin:/bin: sx "$cid" -c 'ln -sfn /bin/false sx 2>/dev/null && echo replaced; true' 2>&1 </dev/null)
check "a link to a3s-sandbox-exec found through PATH's trailing ':' cannot be replaced" \
  not_contains "$out" replaced
check "... it is still the link to the program" eq "$(readlink "$cws/sx")" "$EXEC"
out=$(cd / && HOME=$cws PATH='~/tools:/usr/bin:/bin' bash -c "sx2 $cid -c 'ln -sfn /bin/false tools/sx2 2>/dev/null && echo replaced; true'" 2>&1 </dev/null)
check "a link to a3s-sandbox-exec found through a '~' PATH entry cannot be replaced" \
  not_contains "$out" replaced
check "... it is still the link to the program" eq "$(readlink "$cws/tools/sx2")" "$EXEC"
"$A3S" session stop "$cid"

# The workspace path re-pointed between commands, or turned into HOME: refused.
rp=$(tmpdir)
mkdir "$rp/ws" "$rp/home"
rid=$(HOME=$rp/home "$A3S" session start -w "$rp/ws")
mv "$rp/home" "$rp/home.old" && mv "$rp/ws" "$rp/home"
run_cli session exec "$rid" -c 'echo planted > .gitconfig'
check "the workspace moved to where HOME is: refused (125)" eq "$RC" 125
check "... nothing written into that HOME" test ! -e "$rp/home/.gitconfig"
"$A3S" session stop "$rid"
mv "$rp/home" "$rp/ws2" && mkdir "$rp/ws3"
rid=$("$A3S" session start -w "$rp/ws3")
mv "$rp/ws3" "$rp/ws3.old" && mkdir "$rp/ws3"
run_cli session exec "$rid" -c 'echo x > moved.txt'
check "the workspace path now names another directory: refused (125)" eq "$RC" 125
check "... nothing written in either" test ! -e "$rp/ws3/moved.txt" -a ! -e "$rp/ws3.old/moved.txt"
"$A3S" session stop "$rid"

# --- refusals -----------------------------------------------------------------------------
ex --tty -c true
check "--tty in a session: refused (125)" eq "$RC" 125
run_cli session start -w "$ws" --grant example.com
check "a session with grants: refused (125)" eq "$RC" 125
check "... saying so" contains "$ERR" "grants"
run_cli session exec 0123456789abcdef -c true
check "exec in no session: 125, no such session" eq "$RC/$(contains "$ERR" "no such session" && echo y)" "125/y"
run_cli session exec ../../etc -c true
check "an id that is not one: 125" eq "$RC" 125

# --- the next command's launcher waits ready; whatever becomes of it, commands run ------
# (While idle, the session's spare worker holds the next command's launcher, in the
# session's namespaces and the command's own already; when it is gone, the command starts
# one of its own.)
tree_of() { local c; echo "$1"; for c in $(pgrep -P "$1"); do tree_of "$c"; done; }
sv=$("$A3S" session list | sed -n "s/^$id pid=\([0-9]*\) .*/\1/p")
warm_pids() { for p in $(tree_of "$sv"); do
  tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- '--warm' && echo "$p"; done; }
warm_soon() { for _ in $(seq 50); do [ -n "$(warm_pids)" ] && return 0; sleep 0.1; done; return 1; }
check "a launcher waits for the next command" warm_soon
ex -c 'tr "\0" " " </proc/1/cmdline; echo; echo "$PPID"'
check "the command's pid 1 is the launcher that waited (its argv says so)" contains "$OUT" "--warm"
check "... and the command is its child" eq "$(sed -n 2p <<<"$OUT")" 1
warm_soon
for p in $(warm_pids); do kill -KILL "$p" 2>/dev/null; done
ex -c 'echo ran; tr "\0" " " </proc/1/cmdline'
check "the waiting launcher killed: the command still runs" contains "$OUT" ran
check "... under a launcher started for it" not_contains "$OUT" "--warm"
warm_soon
w=$(warm_pids)
canary="warm-canary-$RANDOM$RANDOM"
printf '%s' "$canary" >"$ws/.env.warm"
ex -c 'cat .env.warm; echo done'
check "a secret made while the launcher waited: masked in its command" not_contains "$(both)" "$canary"
check "... the command ran" contains "$OUT" done

# --- stop: nothing left -----------------------------------------------------------------
warm_soon
session_procs=$(tree_of "$sv")
check "the session's processes include a waiting launcher" test -n "$(warm_pids)"
ex -c 'echo "$TMPDIR"'
scratch=$OUT
check "the session's scratch dir exists on the host while it is open" test -d "$scratch"
run_cli session stop "$id"
check "stop: exit 0" eq "$RC" 0
check "stop: the session is no longer listed" not_contains "$("$A3S" session list)" "$id"
ex -c true
check "exec after stop: 125" eq "$RC" 125
check "stop: the scratch dir is gone" test ! -e "$scratch"
check "stop: no placeholder left in the workspace" \
  eq "$(ls -A "$ws" | LC_ALL=C sort | tr '\n' ' ')" ".ENV.Local .env .env.inside .env.warm .git kept.txt "
none_alive() { local p; for p in $1; do kill -0 "$p" 2>/dev/null && { echo "#   $p lives"; return 1; }; done; return 0; }
none_alive_soon() { for _ in $(seq 50); do none_alive "$1" >/dev/null && return 0; sleep 0.1; done; none_alive "$1"; }
check "stop: no process of the session is left (its waiting launcher neither)" none_alive_soon "$session_procs"

# --- SIGKILL of the supervisor: nothing left once the next run has swept ------------------
ws2=$(tmpdir)
id2=$("$A3S" session start -w "$ws2")
pid=$("$A3S" session list | sed -n "s/^$id2 pid=\([0-9]*\) .*/\1/p")
check "the killed session's supervisor is known ($pid)" test -n "$pid"
run_cli session exec "$id2" -c 'echo "$TMPDIR"'
scratch2=$OUT
kdir=$(tmpdir) # ($out holds a command's output by now)
("$A3S" session exec "$id2" -c 'sleep 3019' >/dev/null 2>&1; echo $? >"$kdir/k.rc") &
for _ in $(seq 50); do pgrep -f "sleep 3019" >/dev/null && break; sleep 0.1; done
sv=$pid
warm_soon
killed_procs=$(tree_of "$pid")
check "the killed session held a waiting launcher" test -n "$(warm_pids)"
kill -KILL "$pid"
wait
check "a command running when its session was killed: 125" eq "$(cat "$kdir/k.rc")" 125
check "a command running when its session was killed: its tree is gone" gone_soon "sleep 3019"
check "SIGKILL of the supervisor: none of its processes is left (the waiting launcher neither)" \
  none_alive_soon "$killed_procs"
run_cli -w "$ws2" -- true
check "the next run works" eq "$RC" 0
check "after it: no placeholder left in the workspace" eq "$(ls -A "$ws2")" ""
check "after it: the killed session's scratch dir is gone" test ! -e "$scratch2"
check "the killed session is no longer listed" not_contains "$("$A3S" session list)" "$id2"

# --- stop while requests keep coming: none of them runs on --------------------------------
# A worker forked just before the stop once kept the supervisor's SIGTERM handler (a flag):
# its command ran on, unstopped, after `session stop`. Requests every 1-4 ms on the raw
# socket, the stop in the middle; each round's commands would sleep 45 s if missed.
flood() {
  python3 - "$A3S" "$1" "$2" <<'PY'
import array, json, os, socket, struct, subprocess, sys, time
cli, ws, tag = sys.argv[1:4]
sid = subprocess.run([cli, "session", "start", "-w", ws], capture_output=True, text=True).stdout.strip()
ls = subprocess.run([cli, "session", "list"], capture_output=True, text=True).stdout
pid = [l.split()[1][4:] for l in ls.splitlines() if l.startswith(sid + " ")][0]

path = None
for d in ("/run/user/%d/a3s-sandbox-sessions" % os.getuid(), "/tmp/a3s-sandbox-sessions-%d" % os.getuid()):
    if os.path.exists(os.path.join(d, sid + ".sock")):
        path = os.path.join(d, sid + ".sock")
conns, stop = [], None
for i in range(30):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(path)
    except OSError:
        break
    req = {"op": "exec", "argv": ["sh", "-c", "sleep 45.%s%02d" % (tag, i)], "env": [],
           "json": False, "timeout": 60, "closed": [False] * 3, "guard_files": [cli],
           "guard_dirs": [os.path.dirname(cli)], "guard_image": cli}
    data = json.dumps(req).encode()
    fds = array.array("i", [os.open("/dev/null", os.O_RDONLY)] + [os.open("/dev/null", os.O_WRONLY)] * 2)
    try:
        c.sendmsg([struct.pack("=I", len(data)) + data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
    except OSError:
        pass
    for f in set(fds):
        os.close(f)
    conns.append(c)
    if i == 10:
        stop = subprocess.Popen([cli, "session", "stop", sid], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.001 + 0.001 * (i * 7 % 4))
# What still runs of them once the stop has had 5 s (it takes a fraction of that).
time.sleep(5)
left = subprocess.run(["pgrep", "-f", "^sleep 45.%s" % tag], capture_output=True, text=True).stdout.split()
print(len(left))
subprocess.run(["pkill", "-KILL", "-f", "^sleep 45.%s" % tag])
stop.wait(timeout=120)
for c in conns:
    c.close()
PY
}
missed=0
for r in 1 2 3 4 5 6; do
  fws=$(tmpdir)
  tag="$$$r"
  [ "$(flood "$fws" "$tag")" = 0 ] || missed=$((missed + 1))
done
check "stop amid a flood of requests: no command of them runs on (missed in $missed of 6 rounds)" \
  eq "$missed" 0

# --- --owner: the session ends with its owner -------------------------------------------
sleep 30 &
owner=$!
id3=$("$A3S" session start -w "$ws2" --owner "$owner")
check "--owner: started" is_id "$id3"
kill "$owner"
ended() { for _ in $(seq 50); do "$A3S" session list | grep -q "$1" || return 0; sleep 0.1; done; return 1; }
check "--owner: the session ends when its owner does" ended "$id3"

finish
