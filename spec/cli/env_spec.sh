#!/usr/bin/env bash
# Environment composition (README "What baseline enforces"): explicit entries, what
# the host environment may and may not carry in, the re-homing of HOME/TMP/XDG to the
# per-run scratch dir, dropped capabilities and scrubbed proxies.
source "$(dirname "$0")/lib.sh"
require_sandbox

# Like run_cli, but the CLI is started through `env ARGS...` so the host environment it
# sees can be shaped: run_env [NAME=VALUE...] -- CLI-ARGS...
run_env() {
  local o e pre=()
  while [ "$1" != -- ]; do pre+=("$1"); shift; done
  shift
  o=$(mktemp) e=$(mktemp)
  env "${pre[@]}" "$A3S" "$@" >"$o" 2>"$e" </dev/null
  RC=$?
  OUT=$(cat "$o") ERR=$(cat "$e")
  rm -f "$o" "$e"
}
# No line of an `env` listing starts with NAME= (exact, case-sensitive).
no_var() { ! grep -q "^$2=" <<<"$1" || { echo "#   $2 reached the command: $(grep "^$2=" <<<"$1" | head -1)"; return 1; }; }
has_line() { grep -qxF -- "$2" <<<"$1" || { echo "#   line '$2' missing in: ${1:0:400}"; return 1; }; }
line_of() { sed -n "${2}p" <<<"$1"; }

ws=$(tmpdir)

# --- explicit environment: kept, except bootstrap variables --------------------------
run_cli -w "$ws" -e SAFE_VALUE=visible -e BASH_ENV=attack \
  -c 'printf "%s|%s|%s" "${SAFE_VALUE:-}" "${BASH_ENV:-}" "$HOME"'
check "explicit env: exit 0" eq "$RC" 0
check "explicit env: SAFE_VALUE visible, BASH_ENV removed" contains "|$OUT" "|visible||"
case "$OUT" in visible\|\|*) pass "explicit env: stdout starts with visible||";;
  *) fail "explicit env: stdout starts with visible|| (got '${OUT:0:200}')";; esac
check "explicit env: HOME is not the workspace" not_contains "$OUT" "$ws"

run_cli -w "$ws" -e LD_PRELOAD=x -e GIT_DIR=x -e PYTHONPATH=x -e bash_env=x -e Ld_PreLoad=x \
  -e LUA_INIT_5_4=x -e NODE_OPTIONS=x -e KEEP_ME=kept -c 'env'
check "explicit injection vars: exit 0" eq "$RC" 0
check "explicit KEEP_ME kept" has_line "$OUT" "KEEP_ME=kept"
for v in LD_PRELOAD GIT_DIR PYTHONPATH bash_env Ld_PreLoad LUA_INIT_5_4 NODE_OPTIONS; do
  check "explicit $v stripped" no_var "$OUT" "$v"
done

# A malformed explicit name is refused before anything runs.
run_cli -w "$ws" -e BAD-NAME=x -c 'touch ran-bad-name'
check "bad explicit name: exit 125" eq "$RC" 125
check "bad explicit name: error names the problem" contains "$ERR" "a3s-sandbox: "
check "bad explicit name: nothing ran" test ! -e "$ws/ran-bad-name"

# --- the host environment never carries injection variables in ----------------------
run_env FOO_SECRET=canary-7c1e LD_PRELOAD=/x LD_AUDIT=/x LD_LIBRARY_PATH=/x GIT_CONFIG_GLOBAL=/x \
  GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=evil GIT_DIR=/x \
  'BASH_FUNC_x%%=() { :; }' SHELLOPTS=xtrace BASHOPTS=extdebug PS4='+canary-ps4 ' \
  PROMPT_COMMAND=x IFS=x CDPATH=/ GCONV_PATH=/x BASH_ENV=/x ENV=/x PYTHONPATH=/x \
  NODE_OPTIONS=--require=/x MALLOC_CHECK_=3 \
  -- -w "$ws" -c 'env; echo done-env'
check "host injection vars: exit 0" eq "$RC" 0
check "host injection vars: command ran" contains "$OUT" "done-env"
check "host canary value absent from stdout" not_contains "$OUT" "canary-7c1e"
check "host canary value absent from stderr" not_contains "$ERR" "canary-7c1e"
check "no xtrace/PS4 output from a leaked SHELLOPTS" not_contains "$ERR" "canary-ps4"
for v in FOO_SECRET LD_PRELOAD LD_AUDIT LD_LIBRARY_PATH GIT_CONFIG_GLOBAL GIT_CONFIG_COUNT \
  GIT_CONFIG_KEY_0 GIT_CONFIG_VALUE_0 GIT_DIR 'BASH_FUNC_x%%' SHELLOPTS BASHOPTS PS4 \
  PROMPT_COMMAND IFS CDPATH GCONV_PATH BASH_ENV ENV PYTHONPATH NODE_OPTIONS MALLOC_CHECK_; do
  check "host $v does not reach the command" no_var "$OUT" "$v"
done
check "no BASH_FUNC_ of any name" not_contains "$OUT" "BASH_FUNC_"

# --- HOME / TMPDIR / XDG_* point at one private scratch dir under the host temp dir ----
hosttmp=$(tmpdir)
hosttmp=$(cd "$hosttmp" && pwd -P)
run_env TMPDIR="$hosttmp" -- -w "$ws" -c 'for v in HOME TMPDIR TMP TEMP XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME; do printf "%s\n" "${!v:-unset-$v}"; done
  echo probe > "$HOME/written" && cat "$TMPDIR/written" && echo scratch-writable
  stat -c %a "$HOME"'
check "re-homed: exit 0" eq "$RC" 0
scratch=$(line_of "$OUT" 1)
case "$scratch" in
  "$hosttmp"/?*) pass "HOME is a dir under the host temp dir ($scratch)";;
  *) fail "HOME is a dir under the host temp dir $hosttmp (got '$scratch')";;
esac
i=2
for v in TMPDIR TMP TEMP XDG_CACHE_HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME; do
  check "$v equals HOME (one scratch dir)" eq "$(line_of "$OUT" $i)" "$scratch"
  i=$((i + 1))
done
check "scratch is writable inside" contains "$OUT" "scratch-writable"
check "scratch is mode 0700" eq "$(line_of "$OUT" 11)" 700
check "scratch is not the workspace" not_contains "$scratch" "$ws"
check "scratch removed from the host afterwards" test ! -e "$scratch"
check "nothing left in the host temp dir" eq "$(ls -A "$hosttmp")" ""

# Default host temp dir, and the caller's HOME is not what the command sees.
fakehome=$(tmpdir)
run_env HOME="$fakehome" -- -w "$ws" -c 'printf %s "$HOME"'
check "default temp: exit 0" eq "$RC" 0
check "HOME is not the caller's HOME" not_contains "$OUT" "$fakehome"
deftmp=$(cd "${TMPDIR:-/tmp}" && pwd -P)
case "$OUT" in
  "$deftmp"/?*) pass "HOME is under the default host temp dir";;
  *) fail "HOME is under the default host temp dir $deftmp (got '$OUT')";;
esac

# --- PATH kept, LC_* kept -------------------------------------------------------------
run_env LC_ALL=C.UTF-8 LC_A3S_SPEC=kept-lc -- -w "$ws" -c 'printf "%s\n" "$PATH" "${LC_ALL:-unset}" "${LC_A3S_SPEC:-unset}"'
check "PATH/LC: exit 0" eq "$RC" 0
check "PATH kept as the host's" eq "$(line_of "$OUT" 1)" "$PATH"
check "LC_ALL kept when set" eq "$(line_of "$OUT" 2)" "C.UTF-8"
check "other LC_* kept" eq "$(line_of "$OUT" 3)" "kept-lc"

# --- capabilities all dropped ---------------------------------------------------------
run_cli -w "$ws" -c "grep '^Cap\(Inh\|Prm\|Eff\|Bnd\|Amb\):' /proc/self/status"
check "caps: exit 0" eq "$RC" 0
check "caps: exactly 5 lines" eq "$(grep -c . <<<"$OUT")" 5
check "caps: every set is empty" eq "$(grep -c '0000000000000000$' <<<"$OUT")" 5

# --- proxy variables are scrubbed, from -e and from the host --------------------------
run_env HTTP_PROXY=http://host-evil:1 https_proxy=http://host-evil:2 ALL_PROXY=socks5://host-evil:3 \
  NO_PROXY='*' ftp_proxy=http://host-evil:4 \
  -- -w "$ws" -e HTTPS_PROXY=http://explicit-evil:9 -e http_proxy=http://explicit-evil:8 \
  -e all_proxy=socks5://explicit-evil:7 -e no_proxy='*' -e FTP_PROXY=http://explicit-evil:6 -c 'env'
check "proxies: exit 0" eq "$RC" 0
check "no proxy variable of any case reaches the command" eq "$(grep -ci '_proxy=' <<<"$OUT")" 0
check "no proxy value reaches the command" not_contains "$OUT" "evil"

finish
