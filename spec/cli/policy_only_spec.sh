#!/usr/bin/env bash
# Policy-only commands need no kernel boundary: with a bubblewrap and a launcher that do
# not exist, and (where this host lets us make one) inside a user namespace that may make
# no further user namespaces, `digest`, `check`, `plan` and `plan --explain` work and say
# what they say with the boundary (a plan says when the mapped identity is unavailable);
# a command is still refused (125) and audited, never run weaker.
. "$(dirname "$0")/lib.sh"

ws=$(tmpdir)
nob() { A3S_SANDBOX_BWRAP=/nonexistent/bwrap A3S_SANDBOX_LAUNCHER=/nonexistent/launch "$@"; }

# What they say with the host's own setup, for comparison.
run_cli digest -w "$ws"
want_digest=$OUT
check "digest with the boundary: ok" eq "$RC" 0

nob run_cli digest -w "$ws"
check "digest without bubblewrap: exit 0 ($ERR)" eq "$RC" 0
check "digest without bubblewrap: the same digest" eq "$OUT" "$want_digest"
nob run_cli check baseline -w "$ws"
check "check without bubblewrap: exit 0 ($ERR)" eq "$RC" 0
check "check without bubblewrap: names the digest" contains "$OUT" "$want_digest"
nob run_cli plan -w "$ws"
check "plan without bubblewrap: exit 0 ($ERR)" eq "$RC" 0
check "plan without bubblewrap: the plan's digest" contains "$OUT" "\"digest\": \"$want_digest\""
check "plan without bubblewrap: its filesystem rules" contains "$OUT" "\"fs\""
nob run_cli plan --explain -w "$ws"
check "plan --explain without bubblewrap: exit 0 ($ERR)" eq "$RC" 0
check "plan --explain without bubblewrap: names the policy" contains "$OUT" "Policy baseline"

# A broken policy is still refused the same way.
pd=$(tmpdir)
printf 'error("broken on purpose")\n' >"$pd/broken.lua"
nob run_cli check "$pd/broken.lua" -w "$ws"
check "a broken policy without bubblewrap: refused" test "$RC" -ne 0
check "a broken policy without bubblewrap: the policy's own error" contains "$ERR" "broken on purpose"

# Running a command is refused, and nothing ran.
nob run_cli -w "$ws" -c "touch ran"
check "a command without bubblewrap: refused (125)" eq "$RC" 125
check "a command without bubblewrap: says which program is missing" contains "$ERR" "/nonexistent/bwrap"
check "a command without bubblewrap: nothing ran" eq "$(ls -A "$ws")" ""
aud=$(tmpdir)/audit.jsonl
nob run_cli --audit "$aud" -w "$ws" -c "touch ran"
check "a command without bubblewrap, audited: refused (125)" eq "$RC" 125
check "a command without bubblewrap, audited: the refusal is in the audit log" \
  contains "$(cat "$aud" 2>/dev/null)" '"reason":"boundary-unusable"'
nob run_cli capabilities -w "$ws"
check "capabilities without bubblewrap: the boundary is not usable" contains "$OUT" '"boundary_usable":false'

# No user namespaces either (the root caller's mapped identity cannot be had): the
# policy-only commands still work. unshare -r maps us to root in a namespace whose limit
# of further user namespaces we set to 0.
# Only a root caller needs a user namespace for policy-only work (its mapped identity);
# unshare -r keeps us root, in a namespace that may make no further one.
if [ "$(id -u)" != 0 ]; then
  echo "# not root: the mapped identity (the one user of namespaces here) is never tried"
elif unshare -U -r true 2>/dev/null; then
  out=$(cd / && unshare -U -r env A3S_CLI="$A3S" WS="$ws" bash -c '
    echo 0 >/proc/sys/user/max_user_namespaces || exit 90
    if unshare -U true 2>/dev/null; then exit 91; fi
    export A3S_SANDBOX_BWRAP=/nonexistent/bwrap A3S_SANDBOX_LAUNCHER=/nonexistent/launch
    "$A3S_CLI" digest -w "$WS" && "$A3S_CLI" check baseline -w "$WS" >/dev/null &&
      "$A3S_CLI" plan --explain -w "$WS" >/dev/null &&
      "$A3S_CLI" plan -w "$WS" | grep -q "\"mapped_identity_unavailable\""
  ' 2>&1)
  rc=$?
  check "without user namespaces: digest, check, plan, explain all work ($out)" eq "$rc" 0
  check "without user namespaces: the same digest" eq "$out" "$want_digest"
  # Describing is not running: a configuration error is still one.
  A3S_SANDBOX_MAPPED_ID=abc run_cli plan -w "$ws"
  check "an invalid A3S_SANDBOX_MAPPED_ID: plan refused (125)" eq "$RC" 125
  check "an invalid A3S_SANDBOX_MAPPED_ID: says so" contains "$ERR" "not a usable uid"
elif [ "${A3S_MUST_WORK:-0}" = 1 ]; then
  fail "A3S_MUST_WORK=1, but this host makes no user namespace for the no-userns part"
else
  echo "# this host makes no user namespace for us: the no-userns part is not run"
fi
finish
