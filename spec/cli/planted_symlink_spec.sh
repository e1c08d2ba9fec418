#!/usr/bin/env bash
# A workspace path that is a symlink planted by a sandboxed command: run 1 (-w W)
# replaces W/sub with a symlink to a directory outside W (/etc for root; a directory the
# unprivileged user can write, outside W, otherwise); run 2 (-w W/sub) must then be
# refused (125), naming the canonical path the symlink leads to, and must write nothing
# there. Control (unprivileged caller): a symlink made by root in a directory the user
# cannot write is an administrator's choice, and a workspace given through it still
# works. A root caller can write everywhere: there either outcome is accepted, fail-safe.
source "$(dirname "$0")/lib.sh"
require_sandbox

id=$$-$RANDOM$RANDOM
cleanup_paths=() # never the target itself when it is a system directory (/etc)
on_exit() {
  local p
  for p in "${cleanup_paths[@]}"; do rm -rf "$p"; done
  cleanup
}
trap on_exit EXIT
trap 'exit 130' INT TERM

W=$(tmpdir) || exit 1
mkdir "$W/sub"
printf 'inside\n' >"$W/sub/file"

if [ "$(id -u)" -eq 0 ]; then
  target=/etc
else
  # A directory the user can write, outside W: in its HOME (hidden inside the sandbox)
  # when it can, else /var/tmp.
  tbase=/var/tmp
  [ -d "${HOME:-}" ] && [ -w "$HOME" ] && tbase=$HOME
  target=$(mktemp -d "$tbase/a3s-planted-target-XXXXXX") || exit 1
  cleanup_paths+=("$target")
fi
target_real=$(realpath "$target")
# A directory below the target, for a workspace path with the symlink in the middle.
inner=$target_real/a3s-inner-$id
mkdir "$inner" || exit 1
# What the old code let run 2 write (never the target itself: it may be /etc).
cleanup_paths+=("$target_real/planted-$id" "$inner")
listing() { ls -A "$1" | LC_ALL=C sort; }
target_before=$(listing "$target_real")

# Run 1 plants the symlink from inside the sandbox.
run_cli -w "$W" -c "mv sub sub.real && ln -s '$target' sub"
echo "# run 1 (rc $RC)${ERR:+: ${ERR:0:200}}"
if [ ! -L "$W/sub" ]; then
  echo "# run 1 could not plant the symlink; planting it from the host instead"
  [ -d "$W/sub" ] && mv "$W/sub" "$W/sub.real"
  ln -s "$target" "$W/sub"
fi
check "setup: W/sub is a symlink to $target" eq "$(readlink "$W/sub")" "$target"

# run2 LABEL DIR [CLI ARGS...]: the victim command writes a marker and says it ran; DIR
# is the canonical directory the workspace path leads to through the symlink.
victim='touch "planted-'$id'" && echo RAN-IN-"$PWD"'
run2() {
  local label=$1 dir=$2
  shift 2
  "$@"
  echo "# [$label] rc $RC${ERR:+: ${ERR:0:300}}"
  check "[$label] refused with 125" eq "$RC" 125
  check "[$label] the error names the canonical path ($dir)" contains "$ERR" "$dir"
  check "[$label] nothing ran" not_contains "$OUT" "RAN-IN"
  check "[$label] nothing written into the symlink's target" test ! -e "$dir/planted-$id"
  local now
  now=$(listing "$target_real")
  check "[$label] no entry added to or removed from the target (no placeholder either)" \
    eq "$(comm -3 <(printf '%s\n' "$target_before") <(printf '%s\n' "$now") | tr -d '\t' | tr '\n' ' ')" ""
  check "[$label] nothing added below $inner" eq "$(ls -A "$inner")" ""
  rm -f "$dir/planted-$id" 2>/dev/null
  find "$inner" -mindepth 1 -delete 2>/dev/null
}
run2 "-w W/sub" "$target_real" run_cli -w "$W/sub" -c "$victim"
run2 "-w W/sub/" "$target_real" run_cli -w "$W/sub/" -c "$victim"
run2 "-w W/sub/." "$target_real" run_cli -w "$W/sub/." -c "$victim"
run2 "-w W/sub/a3s-inner (symlink in the middle)" "$inner" \
  run_cli -w "$W/sub/$(basename "$inner")" -c "$victim"
relative() {
  local r
  r=$(cd "$W" && run_cli -w sub -c "$victim"; printf '%s\x1f%s\x1f%s' "$RC" "$OUT" "$ERR")
  RC=${r%%$'\x1f'*}
  r=${r#*$'\x1f'}
  OUT=${r%%$'\x1f'*}
  ERR=${r#*$'\x1f'}
}
run2 "-w sub (relative, from W)" "$target_real" relative
check "W/sub.real is untouched" eq "$(ls -A "$W/sub.real")" "file"

# --- control: a symlink made by root where the unprivileged user cannot write --------------
ctl_ok() {
  local label=$1 link=$2 dir=$3
  run_cli -w "$link" -c "printf control > control-$id && echo RAN"
  echo "# [control $label] rc $RC${ERR:+: ${ERR:0:300}}"
  check "[control $label] exit 0" eq "$RC" 0
  check "[control $label] the command ran" contains "$OUT" "RAN"
  check "[control $label] the write landed in the symlink's target" \
    eq "$(cat "$dir/control-$id" 2>&1)" "control"
}
if [ "$(id -u)" -eq 0 ]; then
  # A root caller can write every directory, so it cannot tell its own (administrator's)
  # symlinks from planted ones: accepting the link (the write lands in its target) and
  # refusing it (125, naming the canonical path, nothing written) are both fail-safe.
  C=$(tmpdir) || exit 1
  link=/a3s-admin-link-$id
  ln -s "$C" "$link" && cleanup_paths+=("$link")
  run_cli -w "$link" -c "printf control > control-$id && echo RAN"
  echo "# [control $link -> $C, root caller] rc $RC${ERR:+: ${ERR:0:300}}"
  if [ "$RC" -eq 125 ]; then
    check "[control root] refused: the error names the canonical path" contains "$ERR" "$C"
    check "[control root] refused: nothing written" test ! -e "$C/control-$id"
  else
    check "[control root] accepted: exit 0" eq "$RC" 0
    check "[control root] accepted: the write landed in the symlink's target" \
      eq "$(cat "$C/control-$id" 2>&1)" "control"
  fi
else
  # An existing root-owned symlink in a root-owned directory the user cannot write,
  # whose target is a directory the user can create a workspace in.
  done_ctl=''
  for link in /var/lock /run/shm /var/run /var/tmp /usr/tmp; do
    [ -L "$link" ] || continue
    parent=$(dirname "$link")
    [ "$(stat -c %u "$link")" = 0 ] && [ "$(stat -c %u "$parent")" = 0 ] && [ ! -w "$parent" ] || continue
    dest=$(realpath "$link" 2>/dev/null) && [ -d "$dest" ] && [ -w "$dest" ] || continue
    C=$(mktemp -d "$dest/a3s-admin-ctl-XXXXXX") || continue
    cleanup_paths+=("$C")
    ctl_ok "$link/$(basename "$C") (via root's $link -> $dest)" "$link/$(basename "$C")" "$C"
    done_ctl=1
    break
  done
  [ -n "$done_ctl" ] ||
    echo "# control sub-check not run: no root-owned symlink in a root-owned, non-writable directory leads to a directory $(id -un) can write here"
fi

finish
