#!/usr/bin/env bash
# Git metadata below the top of the workspace, and gitdir tricks (THREAT_MODEL.md): a submodule's
# `.git` file, a nested repository's `.git` directory and what a `.git` file names are
# read-only, and their directories cannot be moved, so a command cannot make host git
# (which recurses into submodules) run something. A `.git` variant such as `.GIT` naming
# a directory never hides that directory's secrets from the scan. Host side asserted.
source "$(dirname "$0")/lib.sh"
require_sandbox

both() { printf '%s\n%s' "$OUT" "$ERR"; }
rnd() { head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

# --- a case variant of .git that names a directory does not unmask it --------------------
ws=$(tmpdir)
secret="app-secret-$(rnd)"
mkdir -p "$ws/app/conf"
printf 'SECRET=%s\n' "$secret" >"$ws/app/conf/.env"
run_cli -w "$ws" -c 'printf "gitdir: app\n" > .GIT; printf "gitdir: app\n" > .Git'
run_cli -w "$ws" -c 'cat app/conf/.env; echo; cat app/conf/.env'
check "a .GIT/.Git file naming a directory: its .env stays masked" not_contains "$(both)" "$secret"
check "the secret is untouched on the host" eq "$(cat "$ws/app/conf/.env")" "SECRET=$secret"

# --- a submodule's .git file and gitdir target -------------------------------------------
ws=$(tmpdir)
mkdir -p "$ws/.git/modules/mod" "$ws/mod"
printf '[core]\n\trepositoryformatversion = 0\n' >"$ws/.git/modules/mod/config"
printf 'gitdir: ../.git/modules/mod\n' >"$ws/mod/.git"
printf 'x\n' >"$ws/mod/file"
before_git=$(cat "$ws/mod/.git")
run_cli -w "$ws" -c 'printf "gitdir: ../evil\n" > mod/.git'
check "submodule .git file: writing it fails" test "$RC" -ne 0
check "submodule .git file: unchanged on the host" eq "$(cat "$ws/mod/.git")" "$before_git"
run_cli -w "$ws" -c 'mv mod mod.old && mkdir mod && printf "gitdir: ../evil\n" > mod/.git'
check "submodule dir: cannot be moved away (its .git is held)" test "$RC" -ne 0
check "submodule dir: still the original on the host" eq "$(cat "$ws/mod/.git")" "$before_git"
check "submodule dir: no mod.old left" test ! -e "$ws/mod.old"
run_cli -w "$ws" -c 'rm -f mod/.git; echo y > mod/file'
check "submodule: ordinary files in it stay writable" eq "$(cat "$ws/mod/file")" "y"
check "submodule: .git survives rm" eq "$(cat "$ws/mod/.git")" "$before_git"

# A gitdir target outside .git, relative with '..' from the submodule's own directory.
ws=$(tmpdir)
mkdir -p "$ws/gits/mod" "$ws/sub/mod"
printf '[core]\n' >"$ws/gits/mod/config"
printf 'gitdir: ../../gits/mod\n' >"$ws/sub/mod/.git"
run_cli -w "$ws" -c 'printf "[core]\n\tfsmonitor = echo PWNED\n" >> gits/mod/config; mv gits g2'
check "relative gitdir from a nested .git: the target is read-only" \
  eq "$(cat "$ws/gits/mod/config")" "[core]"
check "relative gitdir from a nested .git: its parents cannot be moved" test -d "$ws/gits/mod"

# A nested repository's .git directory.
ws=$(tmpdir)
mkdir -p "$ws/vendor/lib/.git"
printf '[core]\n' >"$ws/vendor/lib/.git/config"
run_cli -w "$ws" -c 'printf "\tfsmonitor = echo PWNED\n" >> vendor/lib/.git/config; mv vendor v2'
check "nested repository: its .git/config is read-only" eq "$(cat "$ws/vendor/lib/.git/config")" "[core]"
check "nested repository: its parents cannot be moved" test -d "$ws/vendor/lib/.git"

# A symbolic link named .git below the top: refused, like one at the top.
ws=$(tmpdir)
mkdir -p "$ws/sub" "$ws/elsewhere"
ln -s ../elsewhere "$ws/sub/.git"
run_cli -w "$ws" -c 'echo ran > ran.txt'
check "a symlink named .git in a subdirectory: refused (125)" eq "$RC" 125
check "a symlink named .git in a subdirectory: nothing ran" test ! -e "$ws/ran.txt"
finish
