#!/usr/bin/env bash
# The baseline re-exposes the directories of PATH read-only (a toolchain under a hidden
# root). A PATH entry inside a workspace (a virtualenv's bin, node_modules/.bin) is a
# name a command can replace with a symbolic link: a later run, in any workspace, must
# not then expose what the link points at. An entry reached without a link still counts.
source "$(dirname "$0")/lib.sh"
require_sandbox

ws1=$(tmpdir) ws2=$(tmpdir) secret=$(tmpdir) tools=$(tmpdir)
canary="path-link-canary-$RANDOM$RANDOM"
printf '%s' "$canary" >"$secret/f"
mkdir -p "$ws1/.venv/bin"
# Run 1: the command replaces the workspace's PATH entry with a link to the secret dir.
run_cli -w "$ws1" -c "rm -rf .venv && mkdir .venv && ln -s '$secret' .venv/bin && echo planted"
check "run 1 planted the link" eq "$OUT" planted
check "setup: the PATH entry is now a link to the secret directory" \
  eq "$(readlink "$ws1/.venv/bin")" "$secret"
# Run 2: another workspace, with that entry still on PATH.
o=$(PATH="$ws1/.venv/bin:/usr/bin:/bin" "$A3S" -w "$ws2" -c "cat '$secret/f'" 2>&1 </dev/null)
check "run 2 (another workspace): the linked directory is not exposed" not_contains "$o" "$canary"
o=$(PATH="$ws1/.venv/bin:/usr/bin:/bin" "$A3S" plan --explain -w "$ws2" 2>&1 </dev/null)
check "run 2's plan: no rule for the link's target" not_contains "$o" "$secret"

# Control: a PATH directory reached without a link (a toolchain under /tmp, hidden by the
# baseline) is exposed read-only.
mkdir "$tools/bin"
printf '#!/bin/sh\necho tool-ran\n' >"$tools/bin/a3s-spec-tool"
chmod 0755 "$tools/bin/a3s-spec-tool" && chmod -R a+rX "$tools"
o=$(PATH="$tools/bin:/usr/bin:/bin" "$A3S" -w "$ws2" -- a3s-spec-tool 2>&1 </dev/null)
check "control: a PATH directory without a link is still exposed" eq "$o" "tool-ran"
finish
