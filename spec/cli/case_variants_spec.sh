#!/usr/bin/env bash
# Case variants of protected names on a case-sensitive filesystem: `.GIT` and `.git` are
# different entries here, and a variant that exists must not stand in for the missing
# canonical name. Run 1 plants .GIT/ .CLAUDE/ .VSCODE/ .MCP.JSON .BASHRC; run 2 then
# tries to create the canonical .git/config (an fsmonitor that host git would run),
# .claude/settings.json, .vscode/tasks.json, .mcp.json and .bashrc. After run 2 none of
# the canonical names may exist on the host (placeholders are removed after the run), and
# the variants are unchanged. With both the variant and the canonical entry present,
# both are read-only.
source "$(dirname "$0")/lib.sh"
require_sandbox

CANON_DIRS=(.git .claude .vscode)
CANON_FILES=(.mcp.json .bashrc)
VARIANT_DIRS=(.GIT .CLAUDE .VSCODE)
VARIANT_FILES=(.MCP.JSON .BASHRC)

# A digest of an entry: type, inode, size and content of everything below it.
state() {
  (cd "$1" && for n in "${@:2}"; do
    if [ -e "$n" ] || [ -L "$n" ]; then
      find "$n" -printf '%p %y %i %s\n' | LC_ALL=C sort
      find "$n" -type f -exec md5sum {} + | LC_ALL=C sort -k2
    else
      echo "$n absent"
    fi
  done)
}

# --- variants only: the canonical names are missing ---------------------------------------
W=$(tmpdir) || exit 1
run_cli -w "$W" -c 'mkdir .GIT .CLAUDE .VSCODE; printf orig-x > .GIT/x
  printf orig-mcp > .MCP.JSON; printf orig-bashrc > .BASHRC; ls -A'
echo "# run 1 (rc $RC) planted: $(tr '\n' ' ' <<<"$OUT")"
# Whether or not the sandbox let run 1 plant them, the state under test is "variants
# present, canonical names missing": complete it from the host (a checkout can have it).
planted_by_host=''
for d in "${VARIANT_DIRS[@]}"; do [ -d "$W/$d" ] || { mkdir "$W/$d"; planted_by_host+=" $d"; }; done
[ -f "$W/.GIT/x" ] || { printf orig-x >"$W/.GIT/x"; planted_by_host+=" .GIT/x"; }
[ -f "$W/.MCP.JSON" ] || { printf orig-mcp >"$W/.MCP.JSON"; planted_by_host+=" .MCP.JSON"; }
[ -f "$W/.BASHRC" ] || { printf orig-bashrc >"$W/.BASHRC"; planted_by_host+=" .BASHRC"; }
[ -n "$planted_by_host" ] && echo "# run 1 could not plant:$planted_by_host (planted from the host instead)"
for n in "${CANON_DIRS[@]}" "${CANON_FILES[@]}"; do
  check "setup: canonical $n is missing before run 2" test ! -e "$W/$n" -a ! -L "$W/$n"
done
variants_before=$(state "$W" "${VARIANT_DIRS[@]}" "${VARIANT_FILES[@]}")

attack='w() { what=$1; shift; ( "$@" ) 2>/dev/null && echo "WROTE $what"; }
w .git/config sh -c "mkdir -p .git && printf \"[core]\\n\\tfsmonitor = touch HOSTPWNED\\n\" > .git/config"
w .claude/settings.json sh -c "mkdir -p .claude && printf \"{\\\"hooks\\\":{}}\" > .claude/settings.json"
w .vscode/tasks.json sh -c "mkdir -p .vscode && printf \"{}\" > .vscode/tasks.json"
w .mcp.json sh -c "printf \"{}\" > .mcp.json"
w .bashrc sh -c "printf \"touch HOSTPWNED\\n\" > .bashrc"
w .GIT/x sh -c "printf changed > .GIT/x"
w .GIT/new sh -c "printf new > .GIT/new"
w .CLAUDE/settings.json sh -c "printf {} > .CLAUDE/settings.json"
w .VSCODE/tasks.json sh -c "printf {} > .VSCODE/tasks.json"
w .MCP.JSON sh -c "printf changed > .MCP.JSON"
w .BASHRC sh -c "printf changed > .BASHRC"
w "rm .MCP.JSON" rm -f .MCP.JSON
w "mv .GIT" mv .GIT GIT-moved
exit 0'
run_cli -w "$W" -c "$attack"
echo "# run 2 (rc $RC): $(tr '\n' ';' <<<"$OUT")"
check "run 2: exit 0 (nothing written) or refused (125)" test "$RC" -eq 0 -o "$RC" -eq 125
check "run 2: no write to a protected name or its variant succeeded" eq "$OUT" ""
for n in "${CANON_DIRS[@]}" "${CANON_FILES[@]}"; do
  check "after run 2: canonical $n does not exist on the host" test ! -e "$W/$n" -a ! -L "$W/$n"
done
check "after run 2: no .git/config with an fsmonitor on the host" test ! -e "$W/.git/config"
check "after run 2: the variants are unchanged (.GIT/x, .CLAUDE, .VSCODE, .MCP.JSON, .BASHRC)" \
  eq "$(state "$W" "${VARIANT_DIRS[@]}" "${VARIANT_FILES[@]}")" "$variants_before"
check "after run 2: .GIT/x still holds its original content" eq "$(cat "$W/.GIT/x" 2>&1)" "orig-x"
check "after run 2: no GIT-moved" test ! -e "$W/GIT-moved"
check "after run 2: nothing named HOSTPWNED" eq "$(find "$W" -name HOSTPWNED)" ""

# --- a mixed-case variant planted from the host, canonical name missing --------------------
W3=$(tmpdir) || exit 1
mkdir "$W3/.Git"
printf orig >"$W3/.Git/HEAD"
printf orig >"$W3/.Mcp.Json"
before3=$(state "$W3" .Git .Mcp.Json)
run_cli -w "$W3" -c 'mkdir -p .git && printf "[core]\n\tfsmonitor = touch HOSTPWNED\n" > .git/config
  printf "{}" > .mcp.json; printf x > .Git/HEAD; exit 0'
check "mixed case .Git present: .git does not exist on the host afterwards" test ! -e "$W3/.git"
check "mixed case .Mcp.Json present: .mcp.json does not exist on the host afterwards" \
  test ! -e "$W3/.mcp.json"
check "mixed case variants unchanged" eq "$(state "$W3" .Git .Mcp.Json)" "$before3"

# --- both the variant and the canonical entry exist: both are read-only -------------------
W2=$(tmpdir) || exit 1
mkdir "$W2/.git" "$W2/.GIT" "$W2/.claude" "$W2/.CLAUDE"
printf orig-git >"$W2/.git/config"
printf orig-GIT >"$W2/.GIT/x"
printf orig-claude >"$W2/.claude/settings.json"
printf orig-mcp >"$W2/.mcp.json"
printf orig-MCP >"$W2/.MCP.JSON"
names2=(.git .GIT .claude .CLAUDE .mcp.json .MCP.JSON)
before2=$(state "$W2" "${names2[@]}")
run_cli -w "$W2" -c 'w() { what=$1; shift; ( "$@" ) 2>/dev/null && echo "WROTE $what"; }
w .git/config sh -c "printf changed > .git/config"
w .git/new sh -c "printf new > .git/new"
w .GIT/x sh -c "printf changed > .GIT/x"
w .GIT/new sh -c "printf new > .GIT/new"
w .claude/settings.json sh -c "printf changed > .claude/settings.json"
w .CLAUDE/settings.json sh -c "printf {} > .CLAUDE/settings.json"
w .mcp.json sh -c "printf changed > .mcp.json"
w .MCP.JSON sh -c "printf changed > .MCP.JSON"
w "mv .GIT" mv .GIT GIT-moved
w "rm .mcp.json" rm -f .mcp.json
exit 0'
echo "# both present (rc $RC): $(tr '\n' ';' <<<"$OUT")"
check "both present: exit 0 (nothing written) or refused (125)" test "$RC" -eq 0 -o "$RC" -eq 125
check "both present: no write succeeded" eq "$OUT" ""
check "both present: .git, .GIT, .claude, .CLAUDE, .mcp.json, .MCP.JSON unchanged" \
  eq "$(state "$W2" "${names2[@]}")" "$before2"
check "both present: no GIT-moved" test ! -e "$W2/GIT-moved"

finish
