#!/usr/bin/env bash
# A workspace inside HOME: HOME stays hidden (siblings and credentials invisible), the
# workspace itself is writable, and toolchains still work. Plus: overlapping and
# repeated executions on one workspace stay isolated and stable.
# The mounts it makes (as root) stay in a mount namespace of its own: a concurrent
# spec's session would see the host's mount table change and refuse its next command.
if [ "$(id -u)" = 0 ] && [ -z "${A3S_SPEC_OWN_MOUNTS:-}" ]; then
  exec env A3S_SPEC_OWN_MOUNTS=1 unshare --mount --propagation private bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
require_sandbox

home=$(tmpdir)
ws="$home/projects/app with space"
mkdir -p "$ws" "$home/.ssh" "$home/other"
canary="home-canary-$RANDOM$RANDOM"
echo "$canary" >"$home/.ssh/id_ed25519"
echo "$canary" >"$home/other/notes.txt"
echo "$canary" >"$home/.netrc"
echo original >"$ws/keep.txt"

hrun() { local o e; o=$(mktemp) e=$(mktemp); HOME="$home" "$A3S" -w "$ws" "$@" >"$o" 2>"$e" </dev/null; RC=$?; OUT=$(cat "$o") ERR=$(cat "$e"); rm -f "$o" "$e"; }

hrun -c 'printf written > out.txt; cat keep.txt'
check "workspace under HOME: runs" eq "$RC" 0
check "workspace under HOME: files readable" eq "$OUT" original
check "workspace under HOME: writes land on the host" eq "$(cat "$ws/out.txt")" written

hrun -c "cat '$home/.ssh/id_ed25519' '$home/other/notes.txt' '$home/.netrc'; ls -A '$home' '$home/projects'; true"
check "siblings and credentials in HOME are invisible" not_contains "$OUT$ERR" "$canary"
check "HOME shows only the path to the workspace" eq "$(echo "$OUT" | grep -c -E '^(\.ssh|other|\.netrc)$')" 0

hrun -c "printf x > '$home/other/escape'; printf x > '$home/escape'"
# (This fake HOME lives under /tmp, which is a private writable tmpfs inside: a write
# there may succeed, but it must never reach the host.)
check "no file created in HOME" test ! -e "$home/other/escape" -a ! -e "$home/escape"
check "HOME canaries unchanged" eq "$(cat "$home/.ssh/id_ed25519" "$home/other/notes.txt")" "$canary
$canary"

hrun -- python3 -c 'print(6*7)'
check "toolchains still work with the workspace in HOME" eq "$OUT" 42

# Overlapping executions on one workspace keep their outputs apart.
w2=$(tmpdir)
o1=$(mktemp) o2=$(mktemp)
"$A3S" -w "$w2" -c 'sleep 0.3; printf %s slow-done' >"$o1" 2>/dev/null </dev/null &
p1=$!
sleep 0.05
"$A3S" -w "$w2" -c 'printf %s fast-done' >"$o2" 2>/dev/null </dev/null
r2=$?
wait $p1
r1=$?
check "overlapping: both exit 0" eq "$r1/$r2" "0/0"
check "overlapping: outputs not mixed" eq "$(cat "$o1")|$(cat "$o2")" "slow-done|fast-done"

pids=() outs=()
for w in alpha bravo charlie; do
  f=$(mktemp); outs+=("$f")
  "$A3S" -w "$w2" -- printf %s "$w" >"$f" 2>/dev/null </dev/null &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
got=$(for f in "${outs[@]}"; do cat "$f"; echo; done | sort | tr '\n' ' ')
check "three concurrent runs: outputs exactly the three words" eq "$got" "alpha bravo charlie "
rm -f "$o1" "$o2" "${outs[@]}"

rounds=${A3S_SOAK_ROUNDS:-64}
fails=0
for i in $(seq "$rounds"); do
  out=$("$A3S" -w "$w2" -- printf %s soak-ok 2>/dev/null </dev/null) || fails=$((fails + 1))
  [ "$out" = soak-ok ] || fails=$((fails + 1))
done
check "soak: $rounds repeated runs all succeed" eq "$fails" 0
check "soak: nothing left in the workspace" eq "$(ls -A "$w2")" ""

# HOME itself as the workspace (`cd ~ && a3s-sandbox -- true`) is refused: a command could
# write what the caller's shell and tools run next (.bashrc, .gitconfig, .ssh, ...), outside
# any sandbox. Nothing runs, nothing in HOME changes.
h2=$(tmpdir)
echo "$canary" >"$h2/.npmrc"
echo mine >"$h2/notes.txt"
o=$(mktemp) e=$(mktemp)
(cd "$h2" && HOME="$h2" "$A3S" -c 'echo ran > ran.txt; printf x >> .bashrc' >"$o" 2>"$e" </dev/null)
RC=$?
check "HOME as the workspace: refused (125)" eq "$RC" 125
check "HOME as the workspace: says why" contains "$(cat "$e")" "is your home directory"
check "HOME as the workspace: nothing ran" eq "$(ls -A "$h2" | sort | tr '\n' ' ')" ".npmrc notes.txt "
aud=$(tmpdir)/audit.jsonl
(cd "$h2" && HOME="$h2" "$A3S" --audit "$aud" -c 'echo ran > ran.txt' >/dev/null 2>&1 </dev/null)
check "HOME as the workspace, audited: refused (125)" eq "$?" 125
check "... the refusal is in the audit log" contains "$(cat "$aud" 2>/dev/null)" '"reason":"workspace-refused"'
check "... and nothing ran" test ! -e "$h2/ran.txt"
h3=$(tmpdir)
mkdir -p "$h3/me"
(cd "$h3" && HOME="$h3/me" "$A3S" -- true >/dev/null 2>"$e" </dev/null)
check "a workspace holding HOME: refused (125)" eq "$?" 125
# HOME set elsewhere (su without -, a kept HOME): the passwd home is still a home.
pwh=$(getent passwd "$(id -u)" | cut -d: -f6)
if [ -n "$pwh" ] && [ -d "$pwh" ] && [ -x "$pwh" ]; then
  (cd "$pwh" && HOME="$h3" "$A3S" -c 'true' >/dev/null 2>"$e" </dev/null)
  check "the passwd home as the workspace, HOME set elsewhere: refused (125)" eq "$?" 125
  check "... saying why" contains "$(cat "$e")" "is your home directory $pwh"
fi
# The same home reached through a bind mount (another path, the same directory).
if [ "$(id -u)" = 0 ]; then
  alias=$(tmpdir)
  if mount --bind "$h2" "$alias" 2>/dev/null; then
    (cd / && HOME="$h2" "$A3S" -w "$alias" -c 'echo x > planted' >/dev/null 2>"$e" </dev/null)
    check "HOME through a bind-mount alias: refused (125)" eq "$?" 125
    check "... nothing planted" test ! -e "$h2/planted"
    umount "$alias"
  fi
fi
# A caller whose uid has no passwd entry (a container's --user N, a dynamic user) runs;
# given an entry, its home is refused as the workspace.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  # The CLI's own lookup (and a session of its own): the real CLI in every mode.
  real=${A3S_SESSION_REAL_CLI:-$A3S}
  nouid=54321
  while getent passwd "$nouid" >/dev/null; do nouid=$((nouid + 1)); done
  nh=$(tmpdir)
  chmod 755 "$nh"
  mkdir -p "$nh/h" "$nh/ws"
  chmod 777 "$nh/h" "$nh/ws"
  asuid() { setpriv --reuid="$nouid" --regid="$nouid" --clear-groups "$@"; }
  (cd "$nh/ws" && asuid env HOME="$nh/h" TMPDIR="$nh/h" "$real" -c 'echo ran' >"$o" 2>"$e" </dev/null)
  rc=$?
  check "a uid with no passwd entry: the command runs (exit 0: $(cat "$e"))" eq "$rc" 0
  check "... and its output comes" eq "$(cat "$o")" ran
  (cd "$nh/ws" && asuid env -u HOME TMPDIR="$nh/h" "$real" -c 'echo ran' >"$o" 2>"$e" </dev/null)
  rc=$?
  check "... also with HOME unset (exit 0: $(cat "$e"))" eq "$rc" 0
  # This spec's own mount namespace: /etc/passwd with an entry for that uid.
  cp /etc/passwd "$nh/passwd"
  echo "spec-nobody:x:$nouid:$nouid::$nh/h:/bin/sh" >>"$nh/passwd"
  if mount --bind "$nh/passwd" /etc/passwd 2>/dev/null; then
    (cd "$nh/h" && asuid env HOME="$nh/ws" TMPDIR="$nh/ws" "$real" -c 'echo x > planted' >/dev/null 2>"$e" </dev/null)
    check "its passwd home as the workspace, HOME set elsewhere: refused (125)" eq "$?" 125
    check "... saying why" contains "$(cat "$e")" "is your home directory $nh/h"
    check "... nothing planted" test ! -e "$nh/h/planted"
    # A NIS compat line ("+::::::") is no entry of uid 0: root's entry after it counts.
    { echo "+::::::"; sed "s#^root:x:0:0:[^:]*:[^:]*:#root:x:0:0:root:$nh/h:#" /etc/passwd; } >"$nh/p2"
    cat "$nh/p2" >"$nh/passwd"
    (cd "$nh/h" && HOME="$nh/ws" TMPDIR="$nh/ws" "$real" -c 'echo x > planted' >/dev/null 2>"$e" </dev/null)
    rc=$?
    check "root's passwd home after a compat line, as the workspace: refused (125)" eq "$rc" 125
    check "... nothing planted" test ! -e "$nh/h/planted"
    # A session asks again before each command: a passwd home changed to its workspace
    # (or a directory the workspace holds) since it opened refuses the next command.
    mkdir -p "$nh/sws/sub"
    grep -v '^+' "$nh/p2" | sed "s#^root:x:0:0:[^:]*:[^:]*:#root:x:0:0:root:/root:#" >"$nh/p3"
    cat "$nh/p3" >"$nh/passwd"
    sid=$(cd "$nh/sws" && HOME="$nh/ws" TMPDIR="$nh/ws" "$real" session start 2>"$e")
    check "a session in a workspace that is no home opens ($(cat "$e"))" test -n "$sid"
    sed "s#^root:x:0:0:[^:]*:[^:]*:#root:x:0:0:root:$nh/sws/sub:#" "$nh/p3" >"$nh/passwd"
    HOME="$nh/ws" "$real" session exec "$sid" -c 'touch sub/.bashrc' >/dev/null 2>"$e" </dev/null
    rc=$?
    check "the passwd home moved into the session's workspace: the next command refused (125)" \
      eq "$rc" 125
    check "... saying why" contains "$(cat "$e")" "home directory"
    check "... nothing planted" test ! -e "$nh/sws/sub/.bashrc"
    HOME="$nh/ws" "$real" session stop "$sid" >/dev/null 2>&1
    umount /etc/passwd
  fi
fi
rm -f "$o" "$e"
finish
