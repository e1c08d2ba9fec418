#!/usr/bin/env bash
# A fresh run's sandbox started ahead (backends/linux/ahead.h): bubblewrap and a waiting
# launcher are started while the policy is evaluated, and take the run when it is the
# boundary the run needs. Its command must get exactly what a sandbox started for it
# gets (environment, resource limits of the plan, not the caller's), a run that needs
# another boundary must run in one started for it, and a run refused after the early
# start must leave nothing running. A3S_SANDBOX_AHEAD=0 turns it off: the same checks
# then compare both ways.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v strace >/dev/null || skip_all "strace is not installed (scripts/setup.sh installs it)"

ws=$(tmpdir)
wsr=$(cd "$ws" && pwd -P)
pol=$(tmpdir)
tr=$(tmpdir)

# How the run's launcher was started, from an execve trace of the whole tree (a file per
# process: strace -ff, so no line is split): "warm" (started ahead, without its
# command), "direct" (started with its command), one word per launcher, in pid order.
traced() { # traced NAME CLI-ARGS...: the CLI traced into $tr/NAME.*
  local name=$1; shift
  strace -ff -qq -e trace=execve -o "$tr/$name" "$A3S" "$@" </dev/null
}
launchers() { # launchers NAME
  cat $(ls "$tr/$1".* | sort -t. -k2 -n) |
    sed -n 's|^execve("/proc/self/fd/13", \[\(.*\)\], .*) = 0$|\1|p' |
    while IFS= read -r a; do case "$a" in *'"--warm"'*) echo warm ;; *) echo direct ;; esac; done |
    tr '\n' ' '
}
bwraps() { cat "$tr/$1".* | grep -c '^execve("[^"]*bwrap", '; } # (one stopped at once: "= ?")
ahead_left() { # bubblewrap processes started in this workspace (the spec's alone; POSIX sh)
  local q b=""
  for q in $(pgrep -x bwrap); do
    [ "$(readlink "/proc/$q/cwd" 2>/dev/null)" = "$wsr" ] && b="$b$q "
  done
  echo "$b"
}

# --- the common run takes the sandbox started ahead -----------------------------------
traced on -w "$ws" -- true >/dev/null 2>&1
check "a plain run: one bubblewrap, its launcher started ahead ($(launchers on))" \
  eq "$(bwraps on)/$(launchers on)" "1/warm "
A3S_SANDBOX_AHEAD=0 traced off -w "$ws" -- true >/dev/null 2>&1
check "A3S_SANDBOX_AHEAD=0: started for the run ($(launchers off))" \
  eq "$(bwraps off)/$(launchers off)" "1/direct "

# --- what the command gets is what a sandbox started for it gets ----------------------
# The environment, but for the scratch path (each run's own) and PWD (bubblewrap sets
# PWD=/ where it starts the program itself, a launcher started ahead never had one).
envof() {
  A3S_SANDBOX_AHEAD=$1 "$A3S" -w "$ws" -- env 2>/dev/null </dev/null |
    grep -v '^PWD=' | sed 's|/a3s-sandbox-[A-Za-z0-9]*|/SCRATCH|g' | LC_ALL=C sort
}
e_on=$(envof 1) e_off=$(envof 0)
check "the environment: the same either way" eq "$e_on" "$e_off"
check "... and not empty" contains "$e_on" "PATH="
# The plan's resource limits, not the caller's (the early bubblewrap was started with
# the caller's): soft and hard open files, core size. The caller raises its own first.
lim='echo "$(ulimit -Sn) $(ulimit -Hn) $(ulimit -Sc) $(ulimit -Hc)"'
hard_n=$(ulimit -Hn)
want_n=$(python3 -c 'import sys; print(min(1024, int(sys.argv[1])))' "$hard_n" 2>/dev/null || echo 1024)
for a in 1 0; do
  got=$(ulimit -Sn "$hard_n" 2>/dev/null; ulimit -Sc unlimited 2>/dev/null
        A3S_SANDBOX_AHEAD=$a "$A3S" -w "$ws" -c "$lim" 2>/dev/null </dev/null)
  check "A3S_SANDBOX_AHEAD=$a: the plan's limits (nofile $want_n, no core), not the caller's" \
    eq "$got" "$want_n $want_n 0 0"
done
# A file-size limit of a policy holds in a sandbox started ahead too.
printf 'local plan = a3s.extend("baseline", "fsize")\nplan:limits{ file_size_bytes = 65536 }\nreturn plan\n' \
  >"$pol/fsize.lua"
run_cli -p "$pol/fsize.lua" -w "$ws" -c 'head -c 200000 /dev/zero > big 2>/dev/null; ulimit -f'
check "a policy's file-size limit: 64 KiB written at most" test "$(stat -c %s "$ws/big")" -le 65536
check "... and the command's RLIMIT_FSIZE is the plan's (64 blocks of 1 KiB)" eq "$OUT" 64
rm -f "$ws/big"

# --- a run that needs another boundary gets one started for it ------------------------
# A terminal, or a quota cgroup, or network: here a process quota where it is
# enforceable (the early sandbox is then stopped and a second bubblewrap started).
run_cli capabilities -w "$ws"
if python3 -c 'import json,sys; sys.exit(0 if json.loads(sys.argv[1])["quotas"]["processes"]["enforceable"] else 1)' "$OUT"; then
  printf 'local plan = a3s.extend("baseline", "procs")\nplan:limits{ processes = 64 }\nreturn plan\n' \
    >"$pol/procs.lua"
  traced q -p "$pol/procs.lua" -w "$ws" -c 'echo q-ran' >"$pol/q.out" 2>/dev/null
  check "a quota run: it ran" eq "$(cat "$pol/q.out")" q-ran
    # (the one started ahead may be stopped before it started its launcher)
  check "... in a sandbox started for it, the one started ahead stopped ($(bwraps q): $(launchers q))" \
    eq "$(bwraps q)/$(launchers q | sed 's/^warm //')" "2/direct "
  # Stopped at any point of its start (here slowed down by the trace), it leaves nothing:
  # bubblewrap's first child, waiting for its parent, goes with its process group.
  check "... and nothing of the one started ahead is left ($(ahead_left))" eq "$(ahead_left)" ""
else
  pass "a quota run: not enforceable for this caller here (quota_spec covers the refusal)"
  pass "... (nothing to compare)"
  pass "... (nothing started twice)"
fi

# --- refused after the early start: nothing left running, nothing ran -----------------
# A policy that fails only when it is evaluated for a run (its scratch dir exists then:
# made when the run opened), after the sandbox was started ahead.
printf 'local plan = a3s.extend("baseline", "late")\nif a3s.host.is_dir(ctx.scratch) then error("refused at run time") end\nreturn plan\n' \
  >"$pol/broken.lua"
for i in 1 2 3 4 5; do
  run_cli -p "$pol/broken.lua" -w "$ws" -c ': >ran-marker'
done
check "a policy failing at run time: 125 ($ERR)" eq "$RC" 125
check "... after its sandbox was started ahead" contains "$ERR" "refused at run time"
check "... the command never ran" test ! -e "$ws/ran-marker"
left=$(ahead_left)
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -z "$left" ] && break; sleep 0.1; left=$(ahead_left); done
check "... and no sandbox started ahead is left running ($left)" eq "$left" ""
# ... also in a host that lives on (the CLI's own exit would end it anyway): a Lua host
# whose run was refused has no sandbox of that run left while it goes on.
mod="${A3S_BUILD_DIR:-}/a3s_sandbox.so"
if [ -r "$mod" ] && command -v lua5.4 >/dev/null; then
  lhost=$(T_WS=$ws T_POL=$pol/broken.lua T_LEFT="$(declare -f ahead_left); wsr='$wsr' ahead_left" \
    LUA_CPATH="${A3S_BUILD_DIR}/?.so;;" lua5.4 -e '
    local sb = assert(require("a3s_sandbox").new{workspace = os.getenv("T_WS"),
                                                  policy = os.getenv("T_POL")})
    for _ = 1, 3 do
      local r = sb:exec({"sh", "-c", ": >ran-marker"})
      io.write(r and "ran " or "refused ")
    end
    io.flush()
    os.execute(os.getenv("T_LEFT"))' 2>&1)
  check "a Lua host: three refused runs, no sandbox of theirs left while it lives ($lhost)" \
    eq "$lhost" "refused refused refused "
else
  pass "a Lua host: the module is not built here (nothing to check)"
fi
# The workspace refused after the policy ran (a policy file inside it is refused when
# the run is prepared): the same.
mkdir -p "$ws/inner"
printf 'return a3s.extend("baseline", "inner")\n' >"$ws/inner/p.lua"
run_cli -p "$ws/inner/p.lua" -w "$ws" -c ': >ran-marker'
check "a policy inside the workspace: refused (125)" eq "$RC" 125
check "... nothing ran, nothing left running" eq "$(test -e "$ws/ran-marker" && echo ran)/$(ahead_left)" "/"

# --- a host mount that arrives while the sandbox waits --------------------------------
# Mounts propagate into the waiting sandbox (as into any just started, until its setup
# step makes the view private); the policy is slow here, so the mount surely comes while
# it waits. It must arrive read-only, nosuid and nodev, as the rest of the host does. In
# a private mount namespace of the spec's own (root only: the unprivileged mode has no
# mount namespace to make), with a tmpfs over /srv there, whose mounts are shared.
printf 'local plan = a3s.extend("baseline", "slow")\nlocal t = 0\nfor i = 1, 9000000 do t = t + i end\nreturn plan\n' \
  >"$pol/slow.lua"
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && id a3s-test >/dev/null 2>&1; then
  pub=$(tmpdir) wsu=$(tmpdir)
  chmod 0755 "$pub"
  cp "$pol/slow.lua" "$pub/slow.lua"
  chown a3s-test "$wsu"
  # The command: is the arrival there read-only, nosuid, nodev (1)? does a write to it, or
  # to /dev/zero (a host file bound over the host's /dev/zero arrives there too), land?
  arrive='grep -c " /srv/arr ro,nosuid,nodev" /proc/self/mountinfo
    { echo x >/srv/arr/w; } 2>/dev/null && echo WROTE
    { echo x >/dev/zero; } 2>/dev/null; :'
  out=$(unshare -m --propagation private bash -c '
    mount -t tmpfs spec-srv /srv && mount --make-rshared / && mkdir /srv/arr || exit 9
    # Writable mounts present from the start below directories a caller may not search
    # (0700, another owner): out of the command'"'"'s reach, they must not refuse its run.
    mkdir -m 0700 /srv/privroot /srv/privuser && chown a3s-test /srv/privuser &&
      mount -t tmpfs spec-pr /srv/privroot && mount -t tmpfs spec-pu /srv/privuser || exit 9
    : >/srv/zfile && chmod 0666 /srv/zfile
    for who in root a3s-test; do
      if [ $who = root ]; then "$1" -p "$2" -w "$3" -c "$5" &
      else su a3s-test -s /bin/bash -c "\"\$0\" -p \"\$1\" -w \"\$2\" -c \"\$3\"" "$1" "$2" "$4" "$5" &
      fi
      p=$!
      sleep 0.05
      mount -t tmpfs -o mode=1777 spec-arrival /srv/arr
      mount --bind /srv/zfile /dev/zero
      wait $p
      echo "$who: $(ls -A /srv/arr | tr "\n" " ")/$(cat /srv/zfile)"
      umount /srv/arr /dev/zero
    done' _ "$A3S" "$pub/slow.lua" "$ws" "$wsu" "$arrive" 2>&1)
  check "a mount arriving while a root caller's sandbox waits: seen read-only, nosuid, nodev; nothing written ($out)" \
    eq "$(sed -n '1,2p' <<<"$out")" "1
root: /"
  check "... and an unprivileged caller's ($out)" eq "$(sed -n '3,4p' <<<"$out")" "1
a3s-test: /"
else
  pass "a mount arriving while the sandbox waits: needs root, unshare and the a3s-test user"
  pass "... (unprivileged caller)"
fi

# --- a sandbox started ahead never outlives its caller --------------------------------
# The CLI killed while its sandbox waits: the policy made slow, so the kill comes while
# it waits. Slow in C, not in Lua instructions (the evaluation's budget allows only
# about 0.15 s of those here, less than finding the waiting sandbox takes on a loaded
# machine): about 1.5 s of string copies, within the memory limit.
printf 'local plan = a3s.extend("baseline", "slower")
for i = 1, 300 do local s = string.rep("ab", 1024 * 1024):upper() end
return plan
' \
  >"$pol/slower.lua"
"$A3S" -p "$pol/slower.lua" -w "$ws" -c ': >ran-marker' >/dev/null 2>&1 </dev/null &
cli=$!
for _ in $(seq 1 200); do [ -n "$(ahead_left)" ] && break; sleep 0.01; done
check "while the policy is read, the sandbox started ahead waits" test -n "$(ahead_left)"
kill -KILL "$cli"
wait "$cli" 2>/dev/null
left=$(ahead_left)
for _ in $(seq 1 50); do [ -z "$left" ] && break; sleep 0.05; left=$(ahead_left); done
check "SIGKILL of the CLI: the sandbox started ahead is gone ($left)" eq "$left" ""
check "... and the command never ran" test ! -e "$ws/ran-marker"

finish
