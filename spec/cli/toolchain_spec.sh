#!/usr/bin/env bash
# Toolchains stay usable read-only with the caller's real environment (HOME hidden and
# re-homed, PATH kept): python3 (pyenv shims where that is how the host has it), cc,
# lua5.4, git, and cargo/rustc when the host has them. Nothing is written outside.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws=$(tmpdir)
# Its entries (not its own mtime, nor the shell history the interactive specs running
# beside this one write there).
home_list() { ls -lA --ignore=.bash_history "$HOME" 2>/dev/null | md5sum; }
home_before=$(home_list)

run_cli -w "$ws" -c "python3 -c 'import sys; print(6*7)'"
check "python3 runs" eq "$OUT" 42
printf 'int main(void){return 42;}\n' >"$ws/m.c"
run_cli -w "$ws" -c 'cc -o m m.c && ./m; echo "rc=$?"'
check "cc builds and the binary runs" eq "$OUT" "rc=42"
run_cli -w "$ws" -- lua5.4 -e 'print(1+1)'
check "lua5.4 runs" eq "$OUT" 2
run_cli -w "$ws" -c 'mkdir sub && cd sub && git init -q && git status --porcelain && echo git-ok'
check "git works in the workspace" contains "$OUT" git-ok
if command -v cargo >/dev/null 2>&1 && cargo --version >/dev/null 2>&1; then
  run_cli -w "$ws" -- cargo --version
  check "cargo --version works (rustup toolchain under the hidden HOME)" contains "$OUT" "cargo "
  run_cli -w "$ws" -- rustc --version
  check "rustc --version works" contains "$OUT" "rustc "
else
  echo "# host has no working cargo: cargo check not applicable"
fi
check "the caller's HOME is unchanged" eq "$(home_list)" "$home_before"
finish
