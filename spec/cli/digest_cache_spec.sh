#!/usr/bin/env bash
# The policy digest (what an approval covers) is kept between runs in the state
# directory. A kept digest must never stand for a policy other than the one it was taken
# of: a module the policy requires changes, an entry is damaged, not ours, or writable by
# others, and the digest is what a full evaluation (`check`) says. No command can write
# the state directory: a plan that would make it writable is refused.
source "$(dirname "$0")/lib.sh"
require_sandbox

state="/tmp/a3s-sandbox-state-$(id -u)"
cache="$state/digests"
ws=$(tmpdir) pd=$(tmpdir)
chmod 0755 "$pd"
# A policy and a module it requires, found on the policy path.
cat >"$pd/cached.lua" <<'EOF'
local extra = require "cachedmod"
local plan = a3s.extend("baseline", "cached")
plan:limits({ timeout_ms = extra.timeout_ms })
return plan
EOF
printf 'return { timeout_ms = 61000 }\n' >"$pd/cachedmod.lua"
export A3S_SANDBOX_POLICY_PATH="$pd"

# The digest a full evaluation gives (check never reads a kept one).
full_digest() { "$A3S" check cached -w "$ws" 2>&1 </dev/null | sed -n 's/.*(digest \([0-9a-f]*\)).*/\1/p'; }
kept_digest() { "$A3S" digest -w "$ws" --policy cached 2>/dev/null </dev/null; }

d_full=$(full_digest)
check "setup: check prints a digest" test ${#d_full} -eq 64
d1=$(kept_digest)
d2=$(kept_digest)
check "first digest (evaluated) equals the full evaluation's" eq "$d1" "$d_full"
check "second digest (kept) is the same" eq "$d2" "$d_full"
# This spec's own entry: its digest, and its record names this spec's module (entries of
# earlier runs of the spec have the same digest, with another module path).
own_entry() { grep -l -F "$pd/cachedmod.lua" $(grep -l "^digest $d_full\$" "$cache"/* 2>/dev/null) /dev/null 2>/dev/null | head -1; }
check "an entry was kept in the state directory" test -n "$(own_entry)"
check "the cache directory is the caller's alone (0700)" \
  eq "$(stat -c '%a %u' "$cache")" "700 $(id -u)"
run_cli -w "$ws" --policy cached --json -- true
check "a run reports the same digest" contains "$OUT" "\"policy_digest\":\"$d_full\""

# An approval (the digest with a grant) of this policy as it is now.
a1=$("$A3S" digest -w "$ws" --policy cached --grant example.com:443 2>/dev/null </dev/null)
run_cli -w "$ws" --policy cached --grant-digest "$a1" --grant example.com:443 -- true
check "control: the approval runs the policy it was given for" eq "$RC" 0

# The required module changes: the kept digest no longer stands.
printf 'return { timeout_ms = 62000 }\n' >"$pd/cachedmod.lua"
d_new_full=$(full_digest)
d_new=$(kept_digest)
check "module changed: the full evaluation's digest changed" test "$d_new_full" != "$d_full"
check "module changed: the digest is the new full evaluation's, not the kept one" \
  eq "$d_new" "$d_new_full"
run_cli -w "$ws" --policy cached --grant-digest "$a1" --grant example.com:443 -- true
check "module changed: the old approval no longer runs (125)" eq "$RC" 125
check "module changed: refused for the approval" contains "$ERR" "digest"
a2=$("$A3S" digest -w "$ws" --policy cached --grant example.com:443 2>/dev/null </dev/null)
run_cli -w "$ws" --policy cached --grant-digest "$a2" --grant example.com:443 -- true
check "module changed: a new approval runs it" eq "$RC" 0
# A module that appears earlier on the search path takes over: a miss as well.
pd0=$(tmpdir)
chmod 0755 "$pd0"
printf 'return { timeout_ms = 63000 }\n' >"$pd0/cachedmod.lua"
d_shadow=$(A3S_SANDBOX_POLICY_PATH="$pd0:$pd" "$A3S" digest -w "$ws" --policy "$pd/cached.lua" 2>/dev/null </dev/null)
d_shadow_full=$(A3S_SANDBOX_POLICY_PATH="$pd0:$pd" "$A3S" check "$pd/cached.lua" -w "$ws" 2>&1 </dev/null | sed -n 's/.*(digest \([0-9a-f]*\)).*/\1/p')
check "a module shadowed on the search path: the full evaluation's digest" \
  eq "$d_shadow" "$d_shadow_full"
check "a module shadowed on the search path: not the kept one" test "$d_shadow" != "$d_new"
check "setup: the search path is the policy's own again" eq "$A3S_SANDBOX_POLICY_PATH" "$pd"
printf 'return { timeout_ms = 61000 }\n' >"$pd/cachedmod.lua"
check "module restored: the first digest again" eq "$(kept_digest)" "$d_full"

# Entries the cache must not believe. Each is forged from the real entry with a digest of
# zeros: wherever one were read, the digest printed would be the zeros.
zeros=0000000000000000000000000000000000000000000000000000000000000000
entry=$(own_entry)
check "setup: the entry for the policy is found" test -n "$entry"
if [ -n "$entry" ]; then
  keep=$(mktemp) && cp "$entry" "$keep"
  forge() { rm -f "$entry"; sed "s/^digest $d_full\$/digest $zeros/" "$keep" >"$entry"; chmod 0600 "$entry"; }
  forge
  chmod 0622 "$entry"
  check "an entry writable by others is not read" eq "$(kept_digest)" "$d_full"
  forge
  chmod 0660 "$entry"
  chmod g+w "$entry"
  check "an entry writable by the group is not read" eq "$(kept_digest)" "$d_full"
  forge
  mv "$entry" "$entry.target" && ln -s "$entry.target" "$entry"
  check "an entry that is a symbolic link is not read" eq "$(kept_digest)" "$d_full"
  rm -f "$entry.target"
  if [ "$(id -u)" -eq 0 ] && id a3s-test >/dev/null 2>&1; then
    forge
    chown a3s-test "$entry"
    check "an entry owned by another user is not read" eq "$(kept_digest)" "$d_full"
  fi
  # Damaged entries: truncated, bytes flipped in the record, a wrong key line.
  damage() {
    case $1 in
      truncated) head -c 150 ;;
      record) sed 's/A3SF1/A3SF9/' ;;
      key) sed 's/^key 0/key 1/; t; s/^key ./key 0/' ;; # another well-formed key
      length) sed 's/^facts \([0-9]*\)$/facts 1\1/' ;;
    esac
  }
  for d in truncated record key length; do
    rm -f "$entry"
    sed "s/^digest $d_full\$/digest $zeros/" "$keep" | damage "$d" >"$entry"
    chmod 0600 "$entry"
    check "setup: the $d damage changed the entry" test "$(md5sum <"$entry")" != "$(sed "s/^digest $d_full\$/digest $zeros/" "$keep" | md5sum)"
    check "a damaged entry ($d) is not read" eq "$(kept_digest)" "$d_full"
  done
  # Control: the forged entry, undamaged and ours (0600), is read: each refusal above is
  # the cache's doing, not a miss for some other reason.
  forge
  check "control: the forged entry itself is read (the cache trusts what is ours)" \
    eq "$(kept_digest)" "$zeros"
  rm -f "$entry"
  # A well-formed entry whose record says a required file had other contents.
  rm -f "$entry"
  sed "s/^digest $d_full\$/digest $zeros/; s/timeout_ms = 61000/timeout_ms = 69999/" "$keep" >"$entry"
  chmod 0600 "$entry"
  check "an entry whose files no longer hold is not read" eq "$(kept_digest)" "$d_full"
  rm -f "$keep"
fi

# The state directory is never the command's.
run_cli -w "$ws" -c "ls -A /tmp; test -e '$state' && echo state-is-there"
check "inside: the state directory is not there" not_contains "$OUT" "a3s-sandbox-state"
check "inside: not at its path either" not_contains "$OUT" "state-is-there"
bp=$(tmpdir)
chmod 0755 "$bp"
printf 'local plan = a3s.extend("baseline", "statewide")\nplan:writable("%s", { broaden = true })\nreturn plan\n' "$state" >"$bp/statewide.lua"
printf 'local plan = a3s.extend("baseline", "stateonly")\nplan:writable("%s", { broaden = true, optional = true })\nreturn plan\n' "$cache" >"$bp/stateonly.lua"
tag="forged-$$-$RANDOM"
for p in statewide stateonly; do
  run_cli -w "$ws" --policy "$bp/$p.lua" -c "echo forged > '$cache/$tag'; echo ran"
  check "$p: a writable rule over the state directory is refused (125)" eq "$RC" 125
  check "$p: the error names the state directory" contains "$ERR" "state directory"
  check "$p: the command never ran" not_contains "$OUT" "ran"
  check "$p: nothing written there" test ! -e "$cache/$tag"
  run_cli check "$bp/$p.lua" -w "$ws"
  check "$p: check refuses it too" eq "$RC" 125
done
# Other spellings of the same directory: through a symbolic link on the way, a link to
# it, and the state directory that TMPDIR would hold.
links=$(tmpdir)
ln -s /tmp "$links/tmplink"
ln -s "$state" "$links/statelink"
tb=$(tmpdir)
printf 'local plan = a3s.extend("baseline", "vialink")\nplan:writable("%s", { broaden = true })\nreturn plan\n' "$links/tmplink/$(basename "$state")" >"$bp/vialink.lua"
printf 'local plan = a3s.extend("baseline", "tolink")\nplan:writable("%s", { broaden = true })\nreturn plan\n' "$links/statelink" >"$bp/tolink.lua"
printf 'local plan = a3s.extend("baseline", "intmpdir")\nplan:writable("%s", { broaden = true, optional = true })\nreturn plan\n' "$tb/$(basename "$state")" >"$bp/intmpdir.lua"
for p in vialink tolink intmpdir; do
  case $p in
    vialink) target="$links/tmplink/$(basename "$state")/digests/$tag" ;;
    tolink) target="$links/statelink/digests/$tag" ;;
    intmpdir) target="$tb/$(basename "$state")/$tag"; mkdir -p "$tb/$(basename "$state")" ;;
  esac
  if [ "$p" = intmpdir ]; then
    OUT=$(TMPDIR="$tb" "$A3S" -w "$ws" --policy "$bp/$p.lua" -c "echo forged > '$target'; echo ran" 2>"$tb/err" </dev/null); RC=$?
    ERR=$(cat "$tb/err")
  else
    run_cli -w "$ws" --policy "$bp/$p.lua" -c "echo forged > '$target'; echo ran"
  fi
  check "$p: refused (125)" eq "$RC" 125
  check "$p: the command never ran" not_contains "$OUT" "ran"
  check "$p: nothing written in the state directory" test ! -e "$target"
done
check "vialink: the error says the writable root goes through a link" contains "$(run_cli -w "$ws" --policy "$bp/vialink.lua" -- true; echo "$ERR")" "symbolic link"
finish
