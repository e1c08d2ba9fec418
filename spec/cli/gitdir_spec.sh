#!/usr/bin/env bash
# A `.git` FILE ("gitdir: PATH") protects the git directory it names inside the
# workspace. Protecting the directory itself is not enough: the command must not be able
# to move the directory (or one of its parents) aside and put a directory of its own,
# with a config that host git would obey (core.fsmonitor), where `.git` points. And a
# gitdir target that does not exist yet must not be creatable by the command.
# Each case asserts the host side: the git directory and its config are the very same
# inodes with the same content afterwards, or the run was refused (125).
source "$(dirname "$0")/lib.sh"
require_sandbox

EVIL='[core]\n\trepositoryformatversion = 0\n\tbare = true\n\tfsmonitor = echo PWNED\n'
# plant DIR: shell code making DIR a complete git directory (one that host git would
# accept) with the evil config.
plant() {
  printf '%s' "mkdir -p $1/objects $1/refs && printf 'ref: refs/heads/main\\n' > $1/HEAD && printf '$EVIL' > $1/config"
}
# first line of ERR, for the log
err1() { local e=${ERR%%$'\n'*}; printf '%s' "${e:0:200}"; }

# new_ws GITDIR_LINE PATH: a fresh workspace whose .git file reads "gitdir: GITDIR_LINE"
# and a bare git directory at W/PATH (GITDIR_LINE "ABS": the absolute path of it). Sets W.
new_ws() {
  W=$(tmpdir) || exit 1
  mkdir -p "$W/$(dirname "$2")"
  git init -q --bare "$W/$2" >/dev/null 2>&1 || {
    mkdir -p "$W/$2/objects" "$W/$2/refs"
    printf 'ref: refs/heads/main\n' >"$W/$2/HEAD"
    printf '[core]\n\trepositoryformatversion = 0\n\tbare = false\n' >"$W/$2/config"
  }
  local line=$1
  [ "$line" = ABS ] && line=$W/$2
  printf 'gitdir: %s\n' "$line" >"$W/.git"
  printf 'hello\n' >"$W/README"
}

# id PATH: "type inode" of an entry, not following a symlink.
id_of() { stat -c '%F %i' -- "$1" 2>/dev/null || echo absent; }

# attack LABEL GITDIR_LINE GITDIR_PATH SCRIPT [EXTRA PATHS THAT MUST NOT EXIST AFTER...]
attack() {
  local label=$1 line=$2 gd=$3 script=$4
  shift 4
  new_ws "$line" "$gd"
  local top=${gd%%/*}
  local cfg_before top_before gd_before cfg_id_before
  cfg_before=$(cat "$W/$gd/config")
  cfg_id_before=$(id_of "$W/$gd/config")
  gd_before=$(id_of "$W/$gd")
  top_before=$(id_of "$W/$top")
  run_cli -w "$W" -c "$script"
  echo "# [$label] rc $RC${ERR:+: $(err1)}"
  if [ "$RC" -eq 125 ]; then
    pass "[$label] refused (125)"
  else
    pass "[$label] ran (rc $RC)"
  fi
  check "[$label] W/$top is still the original entry (same type and inode)" \
    eq "$(id_of "$W/$top")" "$top_before"
  check "[$label] W/$gd is still the original git directory" eq "$(id_of "$W/$gd")" "$gd_before"
  check "[$label] W/$gd/config is the same file" eq "$(id_of "$W/$gd/config")" "$cfg_id_before"
  check "[$label] W/$gd/config has the same content (no fsmonitor)" \
    eq "$(cat "$W/$gd/config" 2>&1)" "$cfg_before"
  local p
  for p in "$@"; do
    check "[$label] W/$p does not exist" test ! -e "$W/$p" -a ! -L "$W/$p"
  done
  if command -v git >/dev/null; then
    check "[$label] host git sees no fsmonitor through W/.git" \
      eq "$(cd "$W" && GIT_CEILING_DIRECTORIES=$(dirname "$W") git config --get core.fsmonitor 2>/dev/null)" ""
  fi
}

# The gitdir's parent renamed away, a fresh gitdir with an evil config in its place.
attack "mv parent" "gd/real" "gd/real" \
  "mv gd gd2 && $(plant gd/real)" gd2
# Same with an absolute gitdir path.
attack "mv parent, absolute gitdir" "ABS" "gd/real" \
  "mv gd gd2 && $(plant gd/real)" gd2
# A deeper parent: gitdir: gd/mid/real, gd/mid renamed away.
attack "mv middle parent" "gd/mid/real" "gd/mid/real" \
  "mv gd/mid gd/mid2 && $(plant gd/mid/real)" gd/mid2
# The gitdir itself renamed away.
attack "mv gitdir" "gd/real" "gd/real" \
  "mv gd/real gd/real2 && $(plant gd/real)" gd/real2
# The parent renamed away and replaced by a symlink to a directory the command made.
attack "parent -> symlink" "gd/real" "gd/real" \
  "mv gd gd-away && $(plant evil/real) && ln -s evil gd" \
  gd-away evil
# The parent's contents replaced: remove/rename the gitdir inside a writable parent.
attack "rm -rf gitdir" "gd/real" "gd/real" \
  "rm -rf gd/real; $(plant gd/real)"
# Writing the config in place is the base case (protected directory).
attack "write config" "gd/real" "gd/real" "printf '$EVIL' > gd/real/config"

# --- the gitdir target does not exist (yet) inside the workspace -------------------------
for line in "missing/dir" "ABS"; do
  W=$(tmpdir) || exit 1
  l=$line
  [ "$l" = ABS ] && l=$W/missing/dir
  printf 'gitdir: %s\n' "$l" >"$W/.git"
  run_cli -w "$W" -c "$(plant missing/dir) && echo CREATED"
  echo "# [missing gitdir, $line] rc $RC${ERR:+: $(err1)}"
  check "[missing gitdir, $line] refused (125) or the creation failed" \
    test "$RC" -eq 125 -o "$OUT" != CREATED
  check "[missing gitdir, $line] W/missing does not exist afterwards" \
    test ! -e "$W/missing" -a ! -L "$W/missing"
  check "[missing gitdir, $line] W/.git is unchanged" eq "$(cat "$W/.git")" "gitdir: $l"
done

# A missing gitdir below an existing ordinary directory: creating the target there is
# the same attack.
W=$(tmpdir) || exit 1
mkdir "$W/src"
printf 'keep\n' >"$W/src/file"
printf 'gitdir: src/.gitdir\n' >"$W/.git"
run_cli -w "$W" -c "$(plant src/.gitdir) && echo CREATED"
echo "# [missing gitdir below src] rc $RC${ERR:+: $(err1)}"
check "[missing gitdir below src] refused (125) or the creation failed" \
  test "$RC" -eq 125 -o "$OUT" != CREATED
check "[missing gitdir below src] W/src/.gitdir does not exist afterwards" \
  test ! -e "$W/src/.gitdir" -a ! -L "$W/src/.gitdir"
check "[missing gitdir below src] W/src is otherwise untouched" eq "$(ls -A "$W/src")" "file"

finish
