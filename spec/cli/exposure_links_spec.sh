#!/usr/bin/env bash
# A policy's re-exposures (toolchain roots, caches) never follow a link a command could
# have planted. Attack: a toolchain location (NVM_DIR, ~/.cargo) leads into a workspace;
# a first run replaces that directory with a link to a directory the sandbox hides (here
# a canary dir beside the workspace, standing for another project or a hidden home); a
# second run must not see the canary, also when the planter made the directory holding
# its link read-only. The host side is checked: the canary is unread, nothing is written
# beside it, and the plan never names it.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir) out=$(tmpdir)
mkdir -p "$out/secret" "$ws/nvm"
echo "EXPOSED-CANARY" >"$out/secret/.env"
chmod 0755 "$out" "$out/secret"; chmod 0644 "$out/secret/.env"

# Before: the canary dir is hidden (it lies in a hidden /tmp), the toolchain dir is seen.
NVM_DIR="$ws/nvm" run_cli -w "$ws" -c "cat $out/secret/.env"
check "the canary dir is hidden to begin with" not_contains "$OUT" EXPOSED-CANARY

# Run 1 plants the link where the toolchain dir was.
NVM_DIR="$ws/nvm" run_cli -w "$ws" -c "rmdir nvm && ln -s $out/secret nvm && echo planted"
check "run 1 planted the link" eq "$OUT" planted

# Run 2: the baseline resolves NVM_DIR; it must not bind the link's target.
NVM_DIR="$ws/nvm" run_cli -w "$ws" -c "cat $out/secret/.env; cat nvm/.env; echo done"
check "run 2 ran" contains "$OUT" done
check "run 2 does not read the canary through the re-exposed root" not_contains "$OUT" EXPOSED-CANARY
NVM_DIR="$ws/nvm" run_cli plan -w "$ws"
check "the plan never binds the link's target" not_contains "$OUT" "$out/secret"

# The same through a home default: HOME/.cargo is a link into the workspace (a dotfiles
# repository as the workspace); the command swaps the linked directory for a link.
home=$(tmpdir)
mkdir -p "$ws/cargo/bin"
ln -s "$ws/cargo" "$home/.cargo"
chmod 0755 "$home"
HOME="$home" run_cli -w "$ws" -c "mv cargo cargo.real && ln -s $out/secret cargo && echo planted"
check "the home-default link is planted" eq "$OUT" planted
HOME="$home" run_cli -w "$ws" -c "cat $out/secret/.env; echo done"
check "a home default through a planted link exposes nothing" not_contains "$OUT" EXPOSED-CANARY
check "that run ran" contains "$OUT" done

# Still re-exposed: a toolchain directory outside the workspace reached without links.
tc=$(tmpdir)
mkdir -p "$tc/nvm"; echo "TOOLCHAIN-OK" >"$tc/nvm/marker"
chmod -R a+rX "$tc"
NVM_DIR="$tc/nvm" run_cli -w "$ws" -c "cat $tc/nvm/marker"
check "a real toolchain directory is still re-exposed" eq "$OUT" TOOLCHAIN-OK

# The planter then makes the directory holding its link read-only: the caller (whom the
# command runs as) owns that directory and can chmod it back, so the link is still one a
# command could have planted. Through a toolchain variable, a PATH marker's sibling
# (.cargo/bin -> .rustup) and the workspace path itself.
wsA=$(tmpdir) wsB=$(tmpdir)
mkdir -p "$wsA/tools"
run_cli -w "$wsA" -c "ln -s $out/secret tools/cargo && chmod 555 tools && echo planted"
check "a link planted in a directory then made read-only" eq "$OUT" planted
CARGO_HOME="$wsA/tools/cargo" run_cli -w "$wsB" -c "cat $out/secret/.env; echo done"
check "... is not followed to a re-exposed root" not_contains "$OUT" EXPOSED-CANARY
check "... and the run ran" contains "$OUT" done
wsE=$(tmpdir)
mkdir -p "$wsE/.cargo/bin"
run_cli -w "$wsE" -c "ln -s $out/secret .rustup && chmod 555 . && echo planted"
PATH="$wsE/.cargo/bin:$PATH" run_cli -w "$wsB" -c "cat $out/secret/.env; echo done"
check "a PATH marker's sibling through such a link exposes nothing" not_contains "$OUT" EXPOSED-CANARY
chmod 755 "$wsE" "$wsA/tools"
wsC=$(tmpdir)
mkdir -p "$wsC/pkgs"
run_cli -w "$wsC" -c "ln -s $out/secret pkgs/app && chmod 555 pkgs && echo planted"
run_cli -w "$wsC/pkgs/app" -c "cat .env; echo PWNED > written.txt"
check "a workspace path through such a link is refused (125)" eq "$RC" 125
check "... nothing read" not_contains "$OUT" EXPOSED-CANARY
check "... nothing written beside the canary" test ! -e "$out/secret/written.txt"
chmod 755 "$wsC/pkgs"

# A toolchain root that holds the workspace is not re-exposed: with HOME's go as GOPATH
# and the workspace go/src/a, go/src/b's secrets would be readable through it.
gh=$(tmpdir)
mkdir -p "$gh/go/src/a" "$gh/go/src/b" "$gh/go/bin"
echo "SIBLING-CANARY" >"$gh/go/src/b/.env"
chmod -R a+rX "$gh"
HOME="$gh" run_cli -w "$gh/go/src/a" -c "cat $gh/go/src/b/.env; echo done"
check "a root holding the workspace: its siblings are not shown" not_contains "$OUT" SIBLING-CANARY
check "... and the run ran" contains "$OUT" done

check "the canary is unchanged on the host" eq "$(cat "$out/secret/.env")" EXPOSED-CANARY
finish
