#!/usr/bin/env bash
# Filesystem writes and protected workspace entries (README "What baseline enforces"):
# only ordinary workspace content and the scratch dir are writable; control metadata
# (.git .a3s .codex ... in any letter case) is read-only; missing protected entries are
# pinned for the run and never left behind; the host outside the workspace is unchanged;
# /tmp is private; HOME is a scratch dir removed afterwards; concurrent runs are isolated.
source "$(dirname "$0")/lib.sh"
require_sandbox

# lib.sh's tmpdir registers its dir for cleanup inside the $(...) subshell, which the
# EXIT trap never sees; register it in this shell instead.
mkdir_tmp() { local d; d=$(tmpdir) || exit 1; _tmp_roots+=("$d"); printf -v "$1" '%s' "$d"; }

id=$$-$RANDOM$RANDOM
PROTECTED_RE='\.git|\.a3s|\.agents|\.codex|\.claude|\.vscode|\.idea|\.gitmodules|\.mcp\.json|\.ripgreprc|\.bashrc|\.bash_profile|\.zshrc|\.zprofile|\.profile'
PROTECTED_DIRS=(.git .a3s .agents .codex .claude .vscode .idea)
PROTECTED_FILES=(.gitmodules .mcp.json .ripgreprc .bashrc .bash_profile .zshrc .zprofile .profile)

# The protected names present at the top of a workspace (any case), one per line.
protected_names() { ls -A "$1" | grep -ixE "$PROTECTED_RE" | sort; }

# run_ws WS ARGS...: run_cli -w WS ARGS, then check that no protected placeholder that
# did not exist before the run is left in WS.
_runs=0
run_ws() {
  local ws=$1 before after; shift
  _runs=$((_runs + 1))
  before=$(protected_names "$ws")
  run_cli -w "$ws" "$@"
  local rc=$RC out=$OUT err=$ERR
  after=$(protected_names "$ws")
  check "run $_runs: no placeholder left behind in the workspace" eq "$after" "$before"
  RC=$rc OUT=$out ERR=$err
}

# --- ordinary writes and protected control metadata ------------------------------------
mkdir_tmp ws
mkdir "$ws/.git" "$ws/.a3s"
printf original-git >"$ws/.git/config"
printf original-policy >"$ws/.a3s/policy.acl"
printf workspace-secret >"$ws/.env"

run_ws "$ws" -c 'printf changed > ordinary.txt'
check "ordinary write: exit 0" eq "$RC" 0
check "ordinary write: host file changed" eq "$(cat "$ws/ordinary.txt" 2>&1)" "changed"
check "ordinary write: host .env unchanged" eq "$(cat "$ws/.env")" "workspace-secret"

run_ws "$ws" -c 'printf changed > .git/config'
check "write .git/config: non-zero" test "$RC" -ne 0
check "write .git/config: host content unchanged" eq "$(cat "$ws/.git/config")" "original-git"
run_ws "$ws" -c 'printf changed >> .git/config'
check "append .git/config: non-zero" test "$RC" -ne 0
check "append .git/config: host content unchanged" eq "$(cat "$ws/.git/config")" "original-git"
run_ws "$ws" -c 'printf changed > .a3s/policy.acl'
check "write .a3s/policy.acl: non-zero" test "$RC" -ne 0
check "write .a3s/policy.acl: host content unchanged" \
  eq "$(cat "$ws/.a3s/policy.acl")" "original-policy"

run_ws "$ws" -c 'rm -f .git/config'
check "rm .git/config: non-zero" test "$RC" -ne 0
check "rm .git/config: still there, unchanged" eq "$(cat "$ws/.git/config" 2>&1)" "original-git"
run_ws "$ws" -c 'mv .git/config moved-config'
check "mv .git/config: non-zero" test "$RC" -ne 0
check "mv .git/config: still there" eq "$(cat "$ws/.git/config" 2>&1)" "original-git"
rm -f "$ws/moved-config" # mv may have copied the (readable) file before failing to unlink it
run_ws "$ws" -c 'mv .git git-moved'
check "mv .git: non-zero" test "$RC" -ne 0
check "mv .git: .git still in place" eq "$(cat "$ws/.git/config" 2>&1)" "original-git"
check "mv .git: no git-moved" test ! -e "$ws/git-moved"
run_ws "$ws" -c 'rm -rf .git'
check "rm -rf .git: non-zero" test "$RC" -ne 0
check "rm -rf .git: .git still in place" eq "$(cat "$ws/.git/config" 2>&1)" "original-git"
run_ws "$ws" -c 'printf new > .git/new'
check "create .git/new: non-zero" test "$RC" -ne 0
check "create .git/new: absent on the host" test ! -e "$ws/.git/new"
run_ws "$ws" -c 'cat .git/config'
check "protected files stay readable" eq "$OUT" "original-git"

# The .a3s/loops write exception (goal-loop artifacts), when the directory exists.
mkdir -p "$ws/.a3s/loops/goal-carve"
run_ws "$ws" -c 'printf carved > .a3s/loops/goal-carve/ACCEPTANCE.md'
check ".a3s/loops write: exit 0" eq "$RC" 0
check ".a3s/loops write: host content is carved" \
  eq "$(cat "$ws/.a3s/loops/goal-carve/ACCEPTANCE.md" 2>&1)" "carved"
run_ws "$ws" -c 'printf changed > .a3s/policy.acl'
check ".a3s stays read-only next to the loops exception" test "$RC" -ne 0
check ".a3s/policy.acl unchanged next to the loops exception" \
  eq "$(cat "$ws/.a3s/policy.acl")" "original-policy"

# Missing protected entries: pinned read-only during the run, gone afterwards.
run_ws "$ws" -c 'mkdir .codex'
check "mkdir .codex: non-zero" test "$RC" -ne 0
check "mkdir .codex: absent on the host afterwards" test ! -e "$ws/.codex"
run_ws "$ws" -c 'touch .gitmodules'
check "touch .gitmodules: non-zero" test "$RC" -ne 0
check "touch .gitmodules: absent on the host afterwards" test ! -e "$ws/.gitmodules"
script='for f in '"${PROTECTED_FILES[*]}"'; do (printf x > "$f") 2>/dev/null && echo "WROTE $f"; done
for d in '"${PROTECTED_DIRS[*]}"'; do
  (mkdir -p "$d/sub") 2>/dev/null && echo "MADE $d/sub"
  (printf x > "$d/file") 2>/dev/null && echo "WROTE $d/file"
  (rmdir "$d" || rm -rf "$d") 2>/dev/null; [ -e "$d" ] || echo "REMOVED $d"
done
exit 0'
run_ws "$ws" -c "$script"
check "every protected name is read-only (nothing written, made or removed)" eq "$OUT" ""
for n in "${PROTECTED_DIRS[@]}" "${PROTECTED_FILES[@]}"; do
  case $n in .git | .a3s) continue ;; esac
  check "protected $n: absent on the host afterwards" test ! -e "$ws/$n"
done
check ".git/config unchanged after all of it" eq "$(cat "$ws/.git/config")" "original-git"
check ".env unchanged after all of it" eq "$(cat "$ws/.env")" "workspace-secret"

# --- case variants of control metadata -----------------------------------------------
mkdir_tmp cv
mkdir "$cv/.GIT"
printf original >"$cv/.MCP.JSON"
run_ws "$cv" -c 'printf changed > .GIT/config'
check "write .GIT/config: non-zero" test "$RC" -ne 0
check "write .GIT/config: absent on the host" test ! -e "$cv/.GIT/config"
run_ws "$cv" -c 'printf changed > .MCP.JSON'
check "write .MCP.JSON: non-zero" test "$RC" -ne 0
check "write .MCP.JSON: unchanged" eq "$(cat "$cv/.MCP.JSON")" "original"
run_ws "$cv" -c 'rm -f .MCP.JSON; mv .GIT GIT-moved'
check "rm .MCP.JSON / mv .GIT: non-zero" test "$RC" -ne 0
check "rm .MCP.JSON: still there" eq "$(cat "$cv/.MCP.JSON" 2>&1)" "original"
check "mv .GIT: still a directory" test -d "$cv/.GIT"
check "mv .GIT: no GIT-moved" test ! -e "$cv/GIT-moved"

# --- writes outside the workspace --------------------------------------------------------
mkdir_tmp outside
run_ws "$ws" -c "printf x > '$outside/f'"
check "write into an outside temp dir: non-zero" test "$RC" -ne 0
check "write into an outside temp dir: absent on the host" test ! -e "$outside/f"
for target in "/etc/a3s-escape-$id" "/usr/a3s-escape-$id" "/var/tmp/a3s-escape-$id"; do
  run_ws "$ws" -c "printf x > '$target'"
  check "write $target: non-zero" test "$RC" -ne 0
  check "write $target: absent on the host" test ! -e "$target"
  rm -f "$target" 2>/dev/null
done
# The workspace's parent is the host temp dir here: inside it is the private /tmp.
run_ws "$ws" -c 'printf x > ../a3s-escape-parent'
check "write into the workspace's parent: absent on the host" test ! -e "$(dirname "$ws")/a3s-escape-parent"
rm -f "$(dirname "$ws")/a3s-escape-parent"

# /tmp inside is a private tmpfs.
run_ws "$ws" -c "printf inside > /tmp/a3s-private-$id && cat /tmp/a3s-private-$id"
check "/tmp inside is writable" eq "$RC" 0
check "/tmp inside holds what was written" eq "$OUT" "inside"
check "/tmp inside is private: nothing on the host" test ! -e "/tmp/a3s-private-$id"
rm -f "/tmp/a3s-private-$id"

# --- HOME is the per-run scratch dir, writable, removed afterwards -----------------------
run_ws "$ws" -c 'printf home-ok > "$HOME/h.txt" && cat "$HOME/h.txt" && printf "\n%s\n%s\n%s\n" "$HOME" "$TMPDIR" "$XDG_CACHE_HOME"'
check "HOME inside is writable" eq "$RC" 0
check "HOME inside: the file reads back" eq "$(sed -n 1p <<<"$OUT")" "home-ok"
in_home=$(sed -n 2p <<<"$OUT")
check "HOME inside is an absolute path" contains "$in_home" "/"
check "HOME inside is not the caller's HOME" test "$in_home" != "$HOME"
check "HOME inside is not the workspace" test "$in_home" != "$ws"
check "TMPDIR inside is the same scratch dir" eq "$(sed -n 3p <<<"$OUT")" "$in_home"
check "XDG_CACHE_HOME inside is the same scratch dir" eq "$(sed -n 4p <<<"$OUT")" "$in_home"
check "the scratch dir is gone after the run" test ! -e "$in_home"
run_ws "$ws" -t 1 -c 'printf "%s" "$HOME"; mkdir -p "$HOME/deep/er"; chmod 000 "$HOME/deep"; sleep 30'
check "deadline run: exit 124" eq "$RC" 124
check "deadline run: reported HOME" contains "$OUT" "/"
check "the scratch dir is gone even after a deadline kill (and an unreadable subdir)" \
  test ! -e "$OUT"

# --- two concurrent runs on two workspaces stay isolated ---------------------------------
mkdir_tmp L
mkdir_tmp R
lo=$(mktemp) ro=$(mktemp)
"$A3S" -w "$L" -c "sleep 0.5; printf left > left.txt; printf x > '$R/from-left'; ls -A" \
  >"$lo" 2>&1 </dev/null &
lp=$!
"$A3S" -w "$R" -c "sleep 0.5; printf right > right.txt; printf x > '$L/from-right'; ls -A" \
  >"$ro" 2>&1 </dev/null &
rp=$!
wait "$lp"; lrc=$?
wait "$rp"; rrc=$?
check "concurrent left: exit status of its own last command (0)" eq "$lrc" 0
check "concurrent right: exit 0" eq "$rrc" 0
check "concurrent left: left.txt written" eq "$(cat "$L/left.txt" 2>&1)" "left"
check "concurrent right: right.txt written" eq "$(cat "$R/right.txt" 2>&1)" "right"
check "concurrent: left.txt only in the left workspace" test ! -e "$R/left.txt"
check "concurrent: right.txt only in the right workspace" test ! -e "$L/right.txt"
check "concurrent: left could not write into right" test ! -e "$R/from-left"
check "concurrent: right could not write into left" test ! -e "$L/from-right"
check "concurrent left: sees only its own files" not_contains "$(cat "$lo")" "right.txt"
check "concurrent right: sees only its own files" not_contains "$(cat "$ro")" "left.txt"
rm -f "$lo" "$ro"

# Concurrent runs in one workspace share the placeholders; none is left afterwards.
mkdir_tmp S
pids=()
for i in 1 2 3 4; do
  "$A3S" -w "$S" -c "sleep 0.$i; test -d .codex && test -f .mcp.json" >/dev/null 2>&1 </dev/null &
  pids+=($!)
done
allok=0
for p in "${pids[@]}"; do wait "$p" || allok=1; done
check "concurrent runs in one workspace: protected names are pinned in each" eq "$allok" 0
check "concurrent runs in one workspace: no placeholder left" eq "$(ls -A "$S")" ""

# Overlapping runs in one workspace: the first run ends (and releases its placeholders)
# while the second still runs; the second must still be unable to create protected
# entries, and nothing may be left on the host.
mkdir_tmp O
ob=$(mktemp)
"$A3S" -w "$O" -c 'sleep 1' >/dev/null 2>&1 </dev/null &
op=$!
sleep 0.3
"$A3S" -w "$O" -c 'sleep 1.5
  (mkdir .codex) 2>/dev/null && echo "MADE .codex"
  (mkdir .git) 2>/dev/null && echo "MADE .git"
  (printf x > .mcp.json) 2>/dev/null && echo "WROTE .mcp.json"
  (printf x > .bashrc) 2>/dev/null && echo "WROTE .bashrc"
  exit 0' >"$ob" 2>&1 </dev/null
wait "$op"
check "overlapping runs: the later run cannot create protected entries" eq "$(cat "$ob")" ""
check "overlapping runs: nothing left in the workspace" eq "$(ls -A "$O")" ""
rm -f "$ob"

# A killed CLI (SIGKILL, no cleanup possible) leaves nothing once the next run is done.
mkdir_tmp K
kout=$(mktemp)
"$A3S" -w "$K" -c 'printf "%s" "$HOME"; sleep 30' >"$kout" 2>/dev/null </dev/null &
kp=$!
for _ in $(seq 1 100); do [ -n "$(ls -A "$K")" ] && break; sleep 0.05; done
sleep 0.3
kill -KILL "$kp" 2>/dev/null
wait "$kp" 2>/dev/null
sleep 0.3
run_cli -w "$K" -c 'true'
check "after a SIGKILLed run, the next run succeeds" eq "$RC" 0
check "after a SIGKILLed run and the next run: no placeholder left" eq "$(ls -A "$K")" ""
# The killed supervisor could not remove its scratch dir; do not leave it behind.
kscratch=$(cat "$kout")
rm -f "$kout"
case $kscratch in
  */a3s-sandbox-*) [ -e "$kscratch" ] && echo "# note: the killed run's scratch dir $kscratch was left behind" && rm -rf "$kscratch" ;;
esac

finish
