#!/usr/bin/env bash
# Checksums and a detached signature for a directory of release files, with minisign
# (Debian package minisign; scripts/setup.sh installs it):
#   scripts/sign-release.sh [--key SECRET_KEY] DIR
#       writes DIR/SHA256SUMS (every regular file below DIR but the two outputs, sorted)
#       and DIR/SHA256SUMS.minisig, its signature. The secret key is --key, else the file
#       named by $A3S_MINISIGN_KEY (minisign asks for its password on the terminal when
#       it has one).
#   scripts/sign-release.sh --verify --pubkey PUBLIC_KEY DIR
#       the signature of SHA256SUMS against the public key (--pubkey, else
#       $A3S_MINISIGN_PUB), then every file's checksum, and no file below DIR left out of
#       SHA256SUMS. Exit 0 only when all three hold.
# The same checks by hand, from DIR:
#   minisign -V -p PUBLIC_KEY -m SHA256SUMS && sha256sum --strict -c SHA256SUMS
# The public key is published apart from the release (a key inside the directory it
# signs proves nothing).
set -euo pipefail
usage() { # the comment at the top; exit status $1 (default 2)
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit "${1:-2}"
}

mode=sign key=${A3S_MINISIGN_KEY:-} pub=${A3S_MINISIGN_PUB:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --verify) mode=verify; shift ;;
    --key) [ $# -ge 2 ] || usage; key=$2; shift 2 ;;
    --pubkey) [ $# -ge 2 ] || usage; pub=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    --) shift; break ;;
    -*) echo "sign-release: unknown option $1" >&2; usage ;;
    *) break ;;
  esac
done
[ $# -eq 1 ] || usage
[ -d "$1" ] || { echo "sign-release: $1 is not a directory" >&2; exit 2; }
dir=$(cd "$1" && pwd)
command -v minisign >/dev/null ||
  { echo "sign-release: minisign is missing (scripts/setup.sh installs it)" >&2; exit 2; }

# The files that SHA256SUMS covers, relative to DIR, one per line, sorted. Names that
# sha256sum would escape (a newline or a backslash) are refused rather than listed.
listed_files() {
  (cd "$dir" && find . -type f ! -path ./SHA256SUMS ! -path ./SHA256SUMS.minisig -print |
     sed 's|^\./||' | LC_ALL=C sort)
}
bad_names() {
  local nl=$'\n'
  (cd "$dir" && find . -name '*\\*' -print -o -name "*${nl}*" -print) | head -1
}

if [ "$mode" = sign ]; then
  [ -n "$key" ] || { echo "sign-release: no secret key: --key FILE or A3S_MINISIGN_KEY" >&2; exit 2; }
  [ -f "$key" ] || { echo "sign-release: no secret key file $key" >&2; exit 2; }
  [ -z "$(bad_names)" ] || { echo "sign-release: a file name with a backslash or a newline: $(bad_names)" >&2; exit 1; }
  [ -n "$(listed_files)" ] || { echo "sign-release: nothing to sign in $dir" >&2; exit 1; }
  tmp=$(mktemp "${TMPDIR:-/tmp}/a3s-sha256sums-XXXXXX")
  trap 'rm -f "$tmp"' EXIT
  # The file list goes through a pipe, not a command line: any number of files.
  (cd "$dir" && listed_files | tr '\n' '\0' | xargs -0 -r sha256sum --) >"$tmp"
  chmod 0644 "$tmp"
  mv "$tmp" "$dir/SHA256SUMS"
  trap - EXIT
  rm -f "$dir/SHA256SUMS.minisig"
  minisign -S -s "$key" -m "$dir/SHA256SUMS" \
    -t "a3s-sandbox release checksums, $(LC_ALL=C date -u +%Y-%m-%dT%H:%M:%SZ)" >/dev/null
  echo "sign-release: signed $(wc -l <"$dir/SHA256SUMS") files: $dir/SHA256SUMS, $dir/SHA256SUMS.minisig"
  exit 0
fi

[ -n "$pub" ] || { echo "sign-release: no public key: --pubkey FILE or A3S_MINISIGN_PUB" >&2; exit 2; }
[ -f "$pub" ] || { echo "sign-release: no public key file $pub" >&2; exit 2; }
for f in SHA256SUMS SHA256SUMS.minisig; do
  [ -f "$dir/$f" ] || { echo "sign-release: FAILED: no $dir/$f" >&2; exit 1; }
done
if ! minisign -V -q -p "$pub" -m "$dir/SHA256SUMS"; then
  echo "sign-release: FAILED: the signature of $dir/SHA256SUMS does not verify with $pub" >&2
  exit 1
fi
if ! (cd "$dir" && sha256sum --strict --quiet -c SHA256SUMS); then
  echo "sign-release: FAILED: a file does not match SHA256SUMS" >&2
  exit 1
fi
unlisted=$(comm -23 <(listed_files) <(sed 's/^[0-9a-f]\{64\}  //' "$dir/SHA256SUMS" | LC_ALL=C sort))
if [ -n "$unlisted" ]; then
  echo "sign-release: FAILED: not covered by SHA256SUMS: $unlisted" >&2
  exit 1
fi
echo "sign-release: OK: the signature and $(wc -l <"$dir/SHA256SUMS") checksums verify"
