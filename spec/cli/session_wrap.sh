#!/bin/bash -p
# The specs' session mode (run.sh session, session-unpriv): stands in for the a3s-sandbox
# CLI. A run becomes `session start` with the run's session-level options (-w, --policy,
# --audit, --allow-host-root), one `a3s-sandbox-exec` with the command-level ones (-t, -e,
# --json, -v, -c, -- PROGRAM...) and `session stop`, so the command runs in a session
# with the output, --json result and exit status the spec expects of a fresh run. Every
# other use (a subcommand; --grant, --tty or --allow-process-host, which sessions do not
# take) goes to the CLI unchanged. bash -p: a spec's injected SHELLOPTS, BASH_ENV or
# exported functions (meant for the sandboxed command) do not run in this stand-in.
# run.sh writes a copy with the real CLI's path in place of the marker (a spec may run it
# with a cleared environment).
real=${A3S_SESSION_REAL_CLI:-@A3S_REAL_CLI@}
[ -x "$real" ] || { echo "session_wrap.sh: no real a3s-sandbox ($real)" >&2; exit 125; }
# The command goes through the session client program beside it (a3s-sandbox-exec, the
# same as `a3s-sandbox session exec`, which session_spec runs).
client=$(dirname "$real")/a3s-sandbox-exec
[ -x "$client" ] || { echo "session_wrap.sh: no a3s-sandbox-exec ($client)" >&2; exit 125; }
all=("$@")
case "${1-}" in
  probe | plan | digest | capabilities | check | session | help | -h | --help | --version)
    exec "$real" "$@" ;;
  run) shift ;;
esac
start=() ex=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) ex+=("$@"); break ;;
    -p | --policy | -w | --workspace | --audit) start+=("$1" "${2-}"); shift 2 || break ;;
    --policy=* | --workspace=* | --audit=* | -p?* | -w?* | --allow-host-root)
      start+=("$1"); shift ;;
    -t | --timeout | -e | --env | -c) ex+=("$1" "${2-}"); shift 2 || break ;;
    --timeout=* | --env=* | -t?* | -e?* | -c?* | --json) ex+=("$1"); shift ;;
    -v | --verbose) ex+=("$1"); shift ;;
    *) exec "$real" "${all[@]}" ;;
  esac
done
# Owned by this script: however it ends (a spec's signal, a timeout), the session ends.
id=$("$real" session start --owner $$ "${start[@]}") || exit 125
"$client" "$id" "${ex[@]}"
rc=$?
"$real" session stop "$id" >/dev/null 2>&1
exit "$rc"
