#!/usr/bin/env bash
# Fail closed when user namespaces are unavailable (README "Fail closed"). Simulated honestly: the CLI
# runs inside an outer bubblewrap sandbox that forbids creating user namespaces, so the
# real bwrap fails the way it does on such a host. Nothing may run; with the explicit
# opt-in the command runs with the process-host backend and a warning.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
outer() {
  local o e
  o=$(mktemp) e=$(mktemp)
  # /tmp is replaced by a tmpfs, so re-expose what the CLI needs wherever it lives.
  local keep=()
  for d in "$(dirname "$A3S")" "${A3S_SOURCE_DIR:-}" "$(dirname "${A3S_SANDBOX_LAUNCHER:-/}")" \
           ${A3S_SANDBOX_POLICY_PATH:+"$A3S_SANDBOX_POLICY_PATH"}; do
    [ -n "$d" ] && [ "$d" != / ] && [ -d "$d" ] && keep+=(--ro-bind "$d" "$d")
  done
  keep+=(--bind "$ws" "$ws")
  bwrap --unshare-user --disable-userns --ro-bind / / --dev /dev --proc /proc \
    --tmpfs /tmp "${keep[@]}" -- "$A3S" "$@" >"$o" 2>"$e" </dev/null
  RC=$?
  OUT=$(cat "$o") ERR=$(cat "$e")
  rm -f "$o" "$e"
}

outer -w "$ws" -c "touch $ws/ran"
check "no user namespaces: exit 125" eq "$RC" 125
check "no user namespaces: the error says why" contains "$ERR" "namespace"
check "no user namespaces: the command never ran" test ! -e "$ws/ran"

outer probe -w "$ws"
check "no user namespaces: probe fails with 125" eq "$RC" 125
check "no user namespaces: probe names the failure" contains "$ERR" "probe failed"

hr=()
[ "$(id -u)" = 0 ] && hr=(--allow-host-root) # host root there: its own opt-in
outer -w "$ws" --json --allow-process-host "${hr[@]}" -c "printf fallback-ran; touch $ws/ran-host"
check "opt-in: the command runs" eq "$RC" 0
check "opt-in: output" contains "$OUT" '"stdout":"fallback-ran"'
check "opt-in: backend is process-host" contains "$OUT" '"backend":"process-host"'
check "opt-in: the warning is printed" contains "$ERR" "NO LOCAL SANDBOX BOUNDARY"
check "opt-in: it really ran on the host side" test -e "$ws/ran-host"
finish
