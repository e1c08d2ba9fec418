#!/usr/bin/env bash
# A session's view is hardened once, when it opens (README "Sessions"): the launcher's
# --hold makes bubblewrap's view private, makes every mount that arrived in it until then
# read-only, nosuid and nodev, and refuses one below the workspace; every command is a
# copy of that view, where nothing arrives any more, so no command looks again. Here
# bubblewrap is started as the session starts it, with one more mount standing for a
# host mount that arrived before the view was private (bound writable), and the
# namespaces the launcher hands over are entered to look at it. As root and as the
# unprivileged test user.
source "$(dirname "$0")/lib.sh"
require_sandbox
LAUNCH=${A3S_BUILD_DIR:-$(dirname "$A3S")}/a3s-sandbox-launch
[ -x "$LAUNCH" ] || skip_all "no launcher at $LAUNCH"
command -v nsenter >/dev/null || skip_all "nsenter is missing"

tools=$(tmpdir)
chmod 0755 "$tools"
# hold.py LAUNCHER WS [BWRAP OPTION...]: bubblewrap as a session's (bwrap.c push_base),
# the extra options before the launcher's --hold; prints the launcher's exit status and
# stderr, then, in the namespaces it handed over, the output of $PROBE.
cat >"$tools/hold.py" <<'PY'
import os, socket, subprocess, sys
launch, ws, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
os.dup2(b.fileno(), 15, inheritable=True)  # A3S_FD_HOLD
caps = []
for c in ("CAP_SYS_ADMIN", "CAP_DAC_OVERRIDE", "CAP_SETUID", "CAP_SETGID", "CAP_SETFCAP"):
    caps += ["--cap-add", c]
argv = ["bwrap", "--die-with-parent", "--new-session", "--unshare-user", "--uid", "0",
        "--gid", "0", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try", "--unshare-net", "--cap-drop", "ALL"] + caps + [
        "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"] + extra + [
        "--", launch, "--hold", "--ws", ws, "--net"]
p = subprocess.run(argv, pass_fds=(15,), capture_output=True, text=True)
os.close(15)
b.close()
print("exit=%d %s" % (p.returncode, p.stderr.strip()))
if p.returncode != 0:
    sys.exit(0)
msg, anc, _, _ = a.recvmsg(1, socket.CMSG_SPACE(4 * 4))
fds = []
for level, kind, data in anc:
    if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
        fds += [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data), 4)]
user, mnt = fds[0], fds[1]
q = subprocess.run(["nsenter", "--preserve-credentials", "--user=/proc/self/fd/%d" % user,
                    "--mount=/proc/self/fd/%d" % mnt, "--", "sh", "-c", os.environ["PROBE"]],
                   pass_fds=(user, mnt), capture_output=True, text=True)
print(q.stdout.strip() or q.stderr.strip())
PY

for who in root a3s-test; do
  if [ $who = a3s-test ]; then
    if [ "$(id -u)" != 0 ] || ! id a3s-test >/dev/null 2>&1 || ! command -v setpriv >/dev/null; then
      pass "as the unprivileged user: needs root, setpriv and the a3s-test user"
      pass "..."
      pass "..."
      pass "..."
      continue
    fi
    as() { setpriv --reuid=a3s-test --regid=a3s-test --init-groups -- env PROBE="$PROBE" "$@"; }
  else
    as() { "$@"; }
  fi
  d=$(tmpdir)
  chmod 0755 "$d"
  mkdir -p "$d/arr" "$d/src" "$d/ws/sub"
  [ $who = a3s-test ] && chown -R a3s-test "$d"
  # The stand-in is writable where nothing hardens it: in bubblewrap's view as it is.
  PROBE="if { echo x >$d/arr/w; } 2>/dev/null; then echo WROTE; else echo REFUSED; fi"
  out=$(as bwrap --unshare-user --ro-bind / / --dev /dev --bind "$d/src" "$d/arr" -- sh -c "$PROBE")
  check "$who: the stand-in for an arrival is writable in bubblewrap's view ($out)" eq "$out" "WROTE"
  rm -f "$d/src/w"
  out=$(PROBE="$PROBE" as python3 "$tools/hold.py" "$LAUNCH" "$d/ws" --bind "$d/src" "$d/arr")
  check "$who: the session's view holds it read-only: nothing written ($out)" \
    eq "$out/$(ls -A "$d/src")" "exit=0 
REFUSED/"
  # One below the workspace refuses the session: a command would find it there, writable
  # and unhidden.
  out=$(PROBE=: as python3 "$tools/hold.py" "$LAUNCH" "$d/ws" --bind "$d/src" "$d/ws/sub")
  check "$who: a mount below the workspace refuses the session ($out)" \
    contains "$out" "a mount at $d/ws/sub appeared in the workspace"
  check "$who: ... with the launcher's failure" not_contains "$out" "exit=0"
done

# --- a root caller's command gets its workspace cloned from the host --------------------
# With the mapped identity (root callers) a command's workspace is not the session view's
# copy: it is cloned from the host for each command, after the scan. A host mount made
# below it meanwhile comes with the clone; the command's setup step must refuse it, as a
# fresh run's does. A host loop mounts a secret directory below the workspace and
# unmounts it again (the mount table is the same before and after, so the session's check
# of it passes), while commands run; a 3000-file workspace widens the scan's window. In a
# private mount namespace of the spec's own, where the session is started too.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
  d=$(tmpdir)
  mkdir -p "$d/ws/sub" "$d/secret" "$d/ws/many"
  echo TOPSECRET >"$d/secret/key"
  (cd "$d/ws/many" && seq 3000 | xargs touch)
  out=$(unshare -m --propagation private bash -c '
    cd "$2/ws" && id=$("$1" session start) || exit 9
    ( while :; do mount --bind "$2/secret" "$2/ws/sub"; sleep 0.01; umount "$2/ws/sub"; sleep 0.01; done ) &
    loop=$!
    refused=0
    for i in $(seq 80); do
      o=$("$1" session exec "$id" -- sh -c "cat sub/key 2>/dev/null; echo pwned >sub/written 2>/dev/null; :" 2>&1)
      case "$o" in *TOPSECRET*) echo "READ in command $i";; esac
      case "$o" in *"appeared in the workspace"*) refused=$((refused + 1));; esac
    done
    kill $loop; wait $loop 2>/dev/null
    umount "$2/ws/sub" 2>/dev/null
    "$1" session stop "$id"
    echo "refused=$refused"' _ "$A3S" "$d" 2>&1)
  check "root (mapped identity): a host mount made below the workspace during setup is never read ($out)" \
    not_contains "$out" "READ in command"
  check "... nor written to" test ! -e "$d/secret/written"
  echo "# commands refused because the mount was there: $(grep -o 'refused=[0-9]*' <<<"$out")"
else
  pass "root (mapped identity): a host mount made below the workspace: needs root and unshare"
  pass "..."
fi

# --- a host rename moves a mount below the workspace between commands -------------------
# A mount moves with its directory: renamed into the workspace on the host, it is below
# the workspace in the session's view too. The session's check of the host's mount table
# (whose mount points changed) refuses the next command. As the unprivileged user, whose
# session has no other check of it before its setup step.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && id a3s-test >/dev/null 2>&1 &&
  command -v setpriv >/dev/null; then
  d=$(tmpdir)
  chmod 0755 "$d"
  mkdir -p "$d/out/x/view" "$d/ws"
  chown a3s-test "$d/ws"
  out=$(unshare -m --propagation private bash -c '
    U() { setpriv --reuid=a3s-test --regid=a3s-test --init-groups env HOME=/home/a3s-test "$@"; }
    mount -t tmpfs -o mode=0755 spec-view "$2/out/x/view" && echo HOSTFILE >"$2/out/x/view/f" || exit 9
    cd "$2/ws" && id=$(U "$1" session start -w "$2/ws") || exit 9
    U "$1" session exec "$id" -- true; echo "first=$?"
    mv "$2/out/x" "$2/ws/x" || exit 9
    U "$1" session exec "$id" -c "cat x/view/f; mv x y && echo MOVED"; echo "second=$?"
    U "$1" session stop "$id"
    echo "host: $(ls "$2/ws")"' _ "$A3S" "$d" 2>&1)
  check "a host rename brings a mount below the workspace: the next command is refused ($out)" \
    contains "$out" "second=125"
  check "... it read nothing of the mount, moved nothing" \
    eq "$(grep -c 'HOSTFILE\|MOVED' <<<"$out")/$(grep 'host:' <<<"$out")" "0/host: x"
else
  pass "a host rename brings a mount below the workspace: needs root, unshare, setpriv, a3s-test"
  pass "..."
fi
finish
