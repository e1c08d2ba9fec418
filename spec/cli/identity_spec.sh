#!/usr/bin/env bash
# Who the command is on the host (README and THREAT_MODEL.md, "Root callers"): a root caller's
# command runs under an unprivileged mapped id, so root-only host files stay unreadable
# while the workspace and the scratch dir keep working (idmapped mounts, files owned by
# root on the host); where the workspace cannot be idmapped the run is refused unless
# --allow-host-root. Host /var/tmp is hidden like /tmp. Unprivileged callers run as
# themselves.
# The mounts it makes (as root) stay in a mount namespace of its own: a concurrent
# spec's session would see the host's mount table change and refuse its next command.
if [ "$(id -u)" = 0 ] && [ -z "${A3S_SPEC_OWN_MOUNTS:-}" ]; then
  exec env A3S_SPEC_OWN_MOUNTS=1 unshare --mount --propagation private bash "$0" "$@"
fi
source "$(dirname "$0")/lib.sh"
require_sandbox

rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
both() { printf '%s\n%s' "$OUT" "$ERR"; }
ws=$(tmpdir)
chmod 0755 "$ws"

# --- /var/tmp is hidden (world-readable files of other users were readable) ------------
vt_secret="vartmp-secret-$(rnd)"
vt=""
if [ -w /var/tmp ]; then
  vt=$(mktemp /var/tmp/a3s-spec-XXXXXX)
  printf '%s' "$vt_secret" >"$vt"
  chmod 0644 "$vt"
fi
if [ -n "$vt" ]; then
  run_cli -w "$ws" -c "cat '$vt'; ls -A /var/tmp"
  check "/var/tmp: the host file is not readable inside" not_contains "$(both)" "$vt_secret"
  check "/var/tmp: the host file is not listed inside" not_contains "$OUT" "$(basename "$vt")"
  run_cli -w "$ws" -c 'echo x > /var/tmp/inside && cat /var/tmp/inside'
  check "/var/tmp: writing there stays inside" test ! -e /var/tmp/inside
  rm -f "$vt"
else
  fail "/var/tmp is not writable here: cannot plant the canary"
fi

if [ "$(id -u)" -ne 0 ]; then
  run_cli --json -w "$ws" -c 'id -u; echo mine > owned.txt'
  check "unprivileged caller: runs" eq "$RC" 0
  check "unprivileged caller: identity caller" contains "$OUT" '"identity":"caller"'
  check "unprivileged caller: the command's uid is the caller's" contains "$OUT" "\"stdout\":\"$(id -u)\\n\""
  check "unprivileged caller: files it makes are the caller's" \
    eq "$(stat -c %u "$ws/owned.txt")" "$(id -u)"
  finish
fi

# --- root caller: root-only host files are out of reach ---------------------------------
secret="root-only-$(rnd)"
canary=/etc/a3s-spec-canary-$(rnd)
printf '%s' "$secret" >"$canary"
chmod 0600 "$canary"
trap 'rm -f "$canary"; cleanup' EXIT
run_cli --json -w "$ws" -c "cat '$canary'; head -c 64 '$canary'; id -u"
check "root caller: a 0600 root file outside the workspace is unreadable" \
  not_contains "$(both)" "$secret"
check "root caller: identity mapped" contains "$OUT" '"identity":"mapped"'
check "root caller: the command still sees itself as uid 0" contains "$OUT" '"stdout":"0\n"'
run_cli -w "$ws" -c "printf x >> '$canary'"
check "root caller: the root file is not writable either" eq "$(cat "$canary")" "$secret"
run_cli -w "$ws" -c 'cat /proc/1/environ >/dev/null && echo READ-PID1'
check "root caller: bwrap's own processes are not readable" not_contains "$OUT" READ-PID1

# --- the workspace and the scratch dir keep working, files stay root's on the host -----
printf 'own' >"$ws/private.txt"
chmod 0600 "$ws/private.txt"
run_cli -w "$ws" -c 'cat private.txt; echo new > made.txt; mkdir d && echo y > d/f;
  echo t > "$TMPDIR/t" && cat "$TMPDIR/t"; echo h > "$HOME/h" && cat "$HOME/h"'
check "root caller: workspace and scratch usable" eq "$RC" 0
check "root caller: a 0600 workspace file of the caller is readable" contains "$OUT" own
check "root caller: TMPDIR and HOME (scratch) are writable" contains "$OUT" $'t\nh'
check "root caller: new workspace files belong to root on the host" \
  eq "$(stat -c %u:%g "$ws/made.txt" "$ws/d/f" | sort -u)" "0:0"

# --- a workspace that cannot be idmapped: refused, or host root with the opt-in ---------
ram=$(tmpdir)
if mount -t ramfs -o mode=0755 a3s-spec-ramfs "$ram" 2>/dev/null; then
  trap 'umount "$ram" 2>/dev/null; rm -f "$canary"; cleanup' EXIT
  run_cli -w "$ram" -c 'echo ran > ran.txt'
  check "no idmap on the workspace's filesystem: refused (125)" eq "$RC" 125
  check "no idmap: the message says why and names the opt-in" contains "$ERR" "--allow-host-root"
  check "no idmap: nothing ran" test ! -e "$ram/ran.txt"
  run_cli --json --allow-host-root -w "$ram" -c 'echo ran > ran.txt; id -u'
  check "--allow-host-root: runs" eq "$RC" 0
  check "--allow-host-root: identity host-root" contains "$OUT" '"identity":"host-root"'
  check "--allow-host-root: a loud warning" contains "$ERR" "HOST ROOT"
  # The same opt-in as a policy declaration: in the digest, and a broadening.
  pol=$(tmpdir)
  printf 'local plan = a3s.extend("baseline", "host-root-ok")\nplan:allow_host_root(true)\nreturn plan\n' \
    >"$pol/host-root-ok.lua"
  run_cli --json --policy "$pol/host-root-ok.lua" -w "$ram" -c 'id -u'
  check "plan:allow_host_root(true): runs as host root" contains "$OUT" '"identity":"host-root"'
  d_base=$("$A3S" digest -w "$ws" 2>/dev/null)
  d_opt=$("$A3S" digest --policy "$pol/host-root-ok.lua" -w "$ws" 2>/dev/null)
  check "plan:allow_host_root(true): changes the digest" test "$d_base" != "$d_opt"
  run_cli plan --explain --policy "$pol/host-root-ok.lua" -w "$ws"
  check "plan:allow_host_root(true): plan --explain says so" contains "$OUT" "HOST ROOT"
  umount "$ram"
else
  fail "cannot mount a ramfs to test a workspace without idmapped mounts"
fi
finish
