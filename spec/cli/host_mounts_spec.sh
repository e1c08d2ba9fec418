#!/usr/bin/env bash
# The mounts outside the workspace, which the setup step makes inside the sandbox (plan's
# "setup_mounts"; bubblewrap makes only the host root, /dev and /proc), as the command
# sees them: /etc/shadow unreadable, the hidden roots (HOME, /root, /home, /run, ...)
# empty but for the plan's exposed toolchain directories, which are read-only; /tmp, the
# scratch dir and the workspace writable; every other mount read-only. And a setup step
# handed a host mount it cannot make refuses the run before the command starts.
source "$(dirname "$0")/lib.sh"
require_sandbox
command -v python3 >/dev/null || skip_all "python3 is needed to read the plan"

ws=$(tmpdir)
run_cli plan -w "$ws"
check "plan: exit 0" eq "$RC" 0
plan=$OUT
# What the plan says the setup step mounts: hidden roots (a tmpfs made read-only at the
# end), the writable tmpfs, the exposed binds below hidden roots, the masked files.
plan_list() {
  python3 -c 'import json, sys
d = json.loads(sys.stdin.read())
m, what = d["setup_mounts"], sys.argv[1]
ops, i = [], 0
while i < len(m):
    n = 3 if m[i] in ("--bind", "--ro-bind") else 2
    ops.append(m[i:i + n]); i += n
ro = {o[1] for o in ops if o[0] == "--remount-ro"}
tmpfs = [o[1] for o in ops if o[0] == "--tmpfs"]
hidden = [t for t in tmpfs if t in ro]
under = lambda p, r: p.startswith(r.rstrip("/") + "/")
if what == "hidden":
    out = hidden
elif what == "writable-tmpfs":
    out = [t for t in tmpfs if t not in ro]
elif what == "exposed":
    out = [o[2] for o in ops if o[0] == "--ro-bind" and o[1] == o[2]
           and any(under(o[2], h) for h in hidden)]
elif what == "masked-files":
    out = [o[2] for o in ops if o[0] == "--ro-bind" and o[1] == "/dev/null"]
elif what.startswith("entries:"):  # what a hidden root holds: the first names below it
    h = what[8:]
    targets = [o[-1] for o in ops if o[0] != "--perms"] + [d["roots"]["workspace"]]
    out = sorted({p[len(h.rstrip("/")) + 1:].split("/")[0] for p in targets if under(p, h)})
print("\n".join(out))' "$1" <<<"$plan"
}
hidden=$(plan_list hidden)
exposed=$(plan_list exposed)
masked=$(plan_list masked-files)
wtmpfs=$(plan_list writable-tmpfs)
home=$(realpath "$HOME")
check "plan: HOME is hidden (a hidden root or below one)" test -n "$(while read -r h; do
  case "$home/" in "$h"/*) echo "$h" ;; esac; done <<<"$hidden")"
check "plan: /etc/shadow is masked where the host has it" \
  test ! -e /etc/shadow -o -n "$(grep -x /etc/shadow <<<"$masked")"
check "plan: bwrap_argv makes no mount but the host root, /dev and /proc" eq \
  "$(python3 -c 'import json, sys
a = json.loads(sys.stdin.read())["bwrap_argv"]
print(" ".join(x for x in a if x in ("--tmpfs", "--bind", "--ro-bind", "--dir",
    "--remount-ro", "--dev", "--proc", "--symlink", "--file")))' <<<"$plan")" \
  "--ro-bind --dev --proc"

# One run answers every question: a line per path and check. q LIST: the lines of LIST
# as quoted words for the probe's loops (nothing for an empty list).
q() { local x; while read -r x; do [ -n "$x" ] && printf '%q ' "$x"; done <<<"$1"; }
# w PATH: rw, ro (EROFS: the mount is read-only) or denied (only the permissions say no);
# a directory gets a new file, a file is opened for appending (nothing written).
probe='w() { local e p=$1; [ -d "$p" ] && p=$p/.a3s-probe
  if e=$( (: >>"$p") 2>&1); then [ "$p" = "$1" ] || rm -f "$p"; echo rw
  else case "$e" in *"Read-only file system"*) echo ro ;; *) echo denied ;; esac; fi; }
for f in '"$(q "$masked")"'; do
  echo "mask $f $(stat -c %F:%t:%T "$f") $(head -c 1 "$f" 2>/dev/null | wc -c)"
done
for h in '"$(q "$hidden")"'; do echo "hidden $h $(w "$h") :$(ls -A "$h" | tr "\n" " ")"; done
for e in '"$(q "$exposed")"'; do
  echo "exposed $e $( (if [ -d "$e" ]; then ls "$e"; else head -c 1 "$e"; fi) >/dev/null 2>&1 &&
    echo readable) $(w "$e")"
done
for t in '"$(q "$wtmpfs")"' "$TMPDIR" "$PWD"; do echo "writable $t $(w "$t")"; done
: >/tmp/a3s-host-mounts-probe
# Every mount outside /dev, the writable tmpfs, the scratch dir and the workspace is
# read-only (the mounts below the workspace are the workspace rules: specs of their own).
while read -r _ _ _ _ mp opts _; do
  case "$mp" in /dev|/dev/*) continue ;; esac
  skip=; for t in '"$(q "$wtmpfs")"' "$TMPDIR" "$PWD"; do
    case "$mp/" in "$t"/*) skip=1 ;; esac
  done
  [ -n "$skip" ] || case ",$opts," in *,ro,*) ;; *) echo "rw-mount $mp $opts" ;; esac
done </proc/self/mountinfo
for d in / /usr /etc /var /opt /srv; do [ -d "$d" ] && echo "other $d $(w "$d")"; done
echo done'
run_cli -w "$ws" -c "$probe"
check "the probe ran" eq "$RC/$(tail -n 1 <<<"$OUT")" "0/done"
[ "$RC" -eq 0 ] || echo "# $ERR"
while read -r kind path rest; do
  case "$kind" in
  mask) check "masked $path is the null device and reads nothing" eq "$rest" \
    "character special file:1:3 0" ;;
  hidden)
    want=$(plan_list "entries:$path" | tr '\n' ' ' | sed 's/ $//')
    check "hidden $path is read-only" eq "${rest%% *}" ro
    check "hidden $path holds only what the plan exposes ($want)" eq "${rest#*:}" "$want" ;;
  exposed) check "exposed $path is readable and read-only" eq "$rest" "readable ro" ;;
  writable) check "$path is writable" eq "$rest" rw ;;
  rw-mount) check "no writable mount at $path outside /tmp, the workspace, scratch" false ;;
  other) check "$path is read-only" eq "$rest" ro ;;
  esac
done <<<"$OUT"
check "the masked files were probed" eq "$(grep -c '^mask ' <<<"$OUT")" "$(grep -c . <<<"$masked")"
check "the hidden roots were probed" eq "$(grep -c '^hidden ' <<<"$OUT")" \
  "$(grep -c . <<<"$hidden")"
check "a write to /tmp inside stays inside" test ! -e /tmp/a3s-host-mounts-probe
[ -d /root/.cargo ] && [ "$(id -u)" -eq 0 ] &&
  check "root's toolchain dir /root/.cargo is exposed" contains "$exposed" /root/.cargo

# A workspace below /dev/shm: the sandbox's /dev is bubblewrap's own, so bubblewrap binds
# the host's directory there first and the setup step takes it from there.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  shm=$(mktemp -d /dev/shm/a3s-spec-XXXXXX)
  echo "$shm" >>"$_tmp_list"
  echo host >"$shm/in.txt"
  run_cli -w "$shm" -c 'cat in.txt; echo sandbox >out.txt; pwd'
  check "a workspace below /dev/shm: runs there, reads and writes the host's directory" eq \
    "$RC/$OUT/$(cat "$shm/out.txt" 2>/dev/null)" "0/host
$shm/sandbox"
  [ "$RC" -eq 0 ] || echo "# $ERR"
fi

# A setup step handed a host mount it cannot make refuses the run (125, its message on
# stderr) and the command never starts. bubblewrap is wrapped to add one record in front
# of the real ones (the sealed records come on fd 8, protocol.h).
real_bwrap=${A3S_SANDBOX_BWRAP:-/usr/bin/bwrap}
py=/usr/bin/python3 # not a shim of a version manager: bwrap's environment is not ours
[ -x "$py" ] || py=$(command -v python3)
wrapper() { # wrapper FILE RECORD-FIELDS...: bwrap with that record first
  local f=$1; shift
  {
    echo "#!$py"
    echo 'import os, sys'
    printf 'bad = %s\n' "$(python3 -c 'import sys
print(repr(b"".join(a.encode() + b"\0" for a in sys.argv[1:])))' "$@")"
    echo 'rec = os.pread(8, 64 << 20, 0)'
    echo 'magic = b"a3s-setup-2\0"'
    echo 'assert rec.startswith(magic), rec[:20]'
    echo 'fd = os.memfd_create("records", 0)'
    echo 'os.write(fd, magic + bad + rec[len(magic):])'
    echo 'os.lseek(fd, 0, 0)'
    echo 'os.dup2(fd, 8)'
    printf 'os.execv(%s, [%s] + sys.argv[1:])\n' "'$real_bwrap'" "'$real_bwrap'"
  } >"$f"
  chmod 0755 "$f"
}
wdir=$(tmpdir)
run_wrapped() { # run_wrapped WRAPPER ARGS...: run_cli with that bubblewrap
  local b=$1 o e
  shift
  o=$(mktemp) e=$(mktemp)
  A3S_SANDBOX_BWRAP="$b" "$A3S" "$@" >"$o" 2>"$e" </dev/null
  RC=$? OUT=$(cat "$o") ERR=$(cat "$e")
  rm -f "$o" "$e"
}
broken() { # broken NAME WHY RECORD-FIELDS...
  local name=$1 why=$2; shift 2
  wrapper "$wdir/${name// /-}" "$@"
  run_wrapped "$wdir/${name// /-}" -w "$ws" -c 'echo ran; : >ran-marker'
  check "$name: refused with 125" eq "$RC" 125
  check "$name: the setup step says why" contains "$ERR" "setup: $why"
  check "$name: the command never ran" eq "$OUT/$(test -e "$ws/ran-marker" && echo marker)" /
}
# The wrapper itself is harmless: with a record that changes nothing the run works.
wrapper "$wdir/noop" mnt-dir /tmp 493 0 0 0
run_wrapped "$wdir/noop" -w "$ws" -c 'echo ran'
check "the wrapper alone: the run works" eq "$RC/$OUT" "0/ran"
[ "$RC" -eq 0 ] || echo "# $ERR"
broken "missing bind source" "bind source /nonexistent-a3s-spec" \
  mnt-bind /nonexistent-a3s-spec 1 0 0 0
broken "tmpfs onto a file" "tmpfs on /etc/passwd" mnt-tmpfs /etc/passwd 493 0 0 0
broken "mount point in a read-only directory" "/dev/null onto /usr/a3s-missing/x" \
  mnt-null /usr/a3s-missing/x 0 0 0 0
broken "unknown host record" "unknown host mount record 'mnt-bogus'" mnt-bogus /tmp 0 0 0 0
broken "read-only of a missing path" "read-only /nonexistent-a3s-spec" \
  mnt-ro /nonexistent-a3s-spec 0 0 0 0
finish
