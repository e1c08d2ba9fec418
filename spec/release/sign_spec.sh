#!/usr/bin/env bash
# scripts/sign-release.sh: with a throwaway minisign key made here (no password), a
# directory is signed (SHA256SUMS over every file, SHA256SUMS.minisig) and verifies, by
# the script and by the documented minisign + sha256sum commands; a changed file, a
# changed signature, a changed checksum list, another key, a file added or one removed
# each make verification fail.
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"
command -v minisign >/dev/null || skip_all "minisign is missing (scripts/setup.sh installs it)"
sign=$A3S_SOURCE_DIR/scripts/sign-release.sh

w=$(tmpdir)
minisign -G -W -p "$w/key.pub" -s "$w/key.sec" >/dev/null
minisign -G -W -p "$w/other.pub" -s "$w/other.sec" >/dev/null
check "throwaway keys made" test -s "$w/key.sec" -a -s "$w/other.pub"

rel=$w/release
mkdir -p "$rel/sub"
printf 'program\n' >"$rel/a3s-sandbox"
printf 'sbom\n' >"$rel/sbom.cdx.json"
printf 'nested\n' >"$rel/sub/notes with space.txt"

verify() { # [PUBKEY]: sets OUT (stdout+stderr) and RC
  OUT=$(bash "$sign" --verify --pubkey "${1:-$w/key.pub}" "$rel" 2>&1)
  RC=$?
}
verifies() { verify "$@"; check "$what: verifies ($OUT)" eq "$RC" 0; }
fails() { # MESSAGE-PART [PUBKEY]
  verify "${2:-}"
  check "$what: verification fails" eq "$RC" 1
  check "$what: ... saying why" contains "$OUT" "$1"
}

out=$(bash "$sign" "$rel" 2>&1)
check "no key: refused (exit 2)" eq "$?" 2
check "... naming where a key comes from" contains "$out" "A3S_MINISIGN_KEY"
check "... and nothing written" test ! -e "$rel/SHA256SUMS"

out=$(A3S_MINISIGN_KEY=$w/key.sec bash "$sign" "$rel" 2>&1)
check "signed with the key from A3S_MINISIGN_KEY ($out)" eq "$?" 0
check "SHA256SUMS lists exactly the files, sorted" eq \
  "$(sed 's/^[0-9a-f]\{64\}  //' "$rel/SHA256SUMS" | tr '\n' '|')" \
  "a3s-sandbox|sbom.cdx.json|sub/notes with space.txt|"
check "SHA256SUMS has the files' checksums" eq \
  "$(grep ' sbom.cdx.json$' "$rel/SHA256SUMS" | cut -c1-64)" \
  "$(sha256sum <"$rel/sbom.cdx.json" | cut -c1-64)"
check "SHA256SUMS.minisig is a minisign signature" contains \
  "$(head -1 "$rel/SHA256SUMS.minisig")" "untrusted comment:"

what="as signed"; verifies
check "the documented commands verify it too" \
  bash -c "cd '$rel' && minisign -V -q -p '$w/key.pub' -m SHA256SUMS && sha256sum --strict --quiet -c SHA256SUMS"

cp -a "$rel" "$w/pristine"
restore() { rm -rf "$rel" && cp -a "$w/pristine" "$rel"; }

what="a tampered file"
printf 'program, changed\n' >"$rel/a3s-sandbox"
fails "does not match SHA256SUMS"
check "the documented sha256sum check fails too" \
  bash -c "! (cd '$rel' && sha256sum --strict --quiet -c SHA256SUMS) >/dev/null 2>&1"
restore

what="a tampered signature"
python3 - "$rel/SHA256SUMS.minisig" <<'PY'
import base64, sys
lines = open(sys.argv[1]).read().split("\n")
sig = bytearray(base64.b64decode(lines[1]))
sig[-1] ^= 1  # a bit of the Ed25519 signature itself
lines[1] = base64.b64encode(bytes(sig)).decode()
open(sys.argv[1], "w").write("\n".join(lines))
PY
fails "does not verify"
check "the documented minisign check fails too" \
  bash -c "! minisign -V -q -p '$w/key.pub' -m '$rel/SHA256SUMS' 2>/dev/null"
restore

what="a checksum list changed to match a changed file"
printf 'program, changed\n' >"$rel/a3s-sandbox"
(cd "$rel" && sha256sum -- a3s-sandbox sbom.cdx.json "sub/notes with space.txt" >SHA256SUMS)
fails "does not verify"
restore

what="another key"; fails "does not verify" "$w/other.pub"

what="a file added"
printf 'extra\n' >"$rel/sub/extra"
fails "not covered by SHA256SUMS: sub/extra"
restore

what="a file removed"
rm "$rel/sbom.cdx.json"
fails "does not match SHA256SUMS"
restore

what="the signature removed"
rm "$rel/SHA256SUMS.minisig"
fails "no $rel/SHA256SUMS.minisig"
restore

what="restored"; verifies

# Signing again (--key) replaces both files and covers a new one.
printf 'new\n' >"$rel/NEWS"
out=$(bash "$sign" --key "$w/key.sec" "$rel" 2>&1)
check "signed again with --key ($out)" eq "$?" 0
check "... covering the new file" contains "$(cat "$rel/SHA256SUMS")" "  NEWS"
what="signed again"; verifies
finish
