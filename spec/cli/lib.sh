# Shared helpers for the CLI specs (sourced). Each spec is a sequence of `t_*` checks;
# the spec fails if any check fails. Workspaces and outside dirs are fresh temp dirs.
set -uo pipefail
A3S=${A3S_CLI:?A3S_CLI must point at the a3s-sandbox binary}
_fails=0 _n=0
# tmpdir is usually called as $(tmpdir), in a subshell: record the dirs in a file.
_tmp_list=$(mktemp "${TMPDIR:-/tmp}/a3s-spec-list-XXXXXX")

pass() { _n=$((_n + 1)); echo "ok $_n - $*"; }
fail() { _n=$((_n + 1)); _fails=$((_fails + 1)); echo "not ok $_n - $*"; }
check() { local what=$1; shift; if "$@"; then pass "$what"; else fail "$what"; fi; }
eq() { [ "$1" = "$2" ] || { echo "#   got:      '$1'"; echo "#   expected: '$2'"; return 1; }; }
contains() { case "$1" in *"$2"*) return 0;; esac; echo "#   '$2' not in: ${1:0:400}"; return 1; }
not_contains() { case "$1" in *"$2"*) echo "#   '$2' unexpectedly in: ${1:0:400}"; return 1;; esac; return 0; }

skip_all() {
  echo "SKIP: $*"
  if [ "${A3S_MUST_WORK:-0}" = 1 ]; then echo "A3S_MUST_WORK=1: failing instead"; exit 1; fi
  exit 77
}

tmpdir() { local d; d=$(mktemp -d "${TMPDIR:-/tmp}/a3s-spec-XXXXXX"); echo "$d" >>"$_tmp_list"; echo "$d"; }
cleanup() {
  local d
  while IFS= read -r d; do chmod -R u+rwX "$d" 2>/dev/null; rm -rf "$d"; done <"$_tmp_list"
  rm -f "$_tmp_list"
}
trap cleanup EXIT

# Runs the CLI; sets OUT, ERR, RC.
run_cli() {
  local o e
  o=$(mktemp) e=$(mktemp)
  "$A3S" "$@" >"$o" 2>"$e" </dev/null
  RC=$?
  OUT=$(cat "$o") ERR=$(cat "$e")
  rm -f "$o" "$e"
}

# Skip (or fail under A3S_MUST_WORK=1) when this host cannot run bubblewrap sandboxes.
require_sandbox() {
  local ws; ws=$(tmpdir)
  run_cli probe -w "$ws"
  [ "$RC" -eq 0 ] || skip_all "the sandbox boundary is unavailable here: $ERR"
}

finish() {
  echo "1..$_n"
  [ "$_fails" -eq 0 ] || { echo "# $_fails of $_n failed"; exit 1; }
  exit 0
}
