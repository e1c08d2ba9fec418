#!/usr/bin/env bash
# scripts/generate-sbom.sh: the CycloneDX 1.5 document of the build has the required
# fields (bomFormat, specVersion, a urn:uuid serialNumber, version, metadata with its
# component, timestamp and tools; components with type, name, version and purl), unique
# bom-refs, dependencies that name only existing bom-refs; every library that `ldd` shows
# for the CLI appears as its Debian package (found here with dpkg-query, independently of
# the script) and the CLI depends on it; the statically linked helpers depend on the
# package of the libc.a their link takes (musl's where they are linked against musl); the own files' SHA-256 are theirs. The
# checker itself fails on broken copies of the document.
set -uo pipefail
source "$A3S_SOURCE_DIR/spec/cli/lib.sh"
build=${A3S_BUILD_DIR:?A3S_BUILD_DIR must point at the build tree}
gen=$A3S_SOURCE_DIR/scripts/generate-sbom.sh
w=$(tmpdir)

out=$(SOURCE_DATE_EPOCH=1700000000 bash "$gen" "$build" "$w/sbom.json" 2>&1)
check "generate-sbom.sh exits 0 ($out)" eq "$?" 0

# The packages of what the CLI links, as "name<TAB>version" lines, and of the static libc.
arch=$(dpkg --print-architecture)
pkg_of() { # PATH -> "name<TAB>version" of its Debian package (usr-merge: either spelling)
  local p q owner
  for p in "$1" "$(readlink -f "$1")"; do
    for q in "$p" "${p#/usr}" "/usr$p"; do
      owner=$(dpkg-query -S "$q" 2>/dev/null | sed -n "s|^\([^:, ]*\):$arch: $q\$|\1|p" | head -1)
      [ -n "$owner" ] || owner=$(dpkg-query -S "$q" 2>/dev/null | sed -n "s|^\([^:, ]*\)[^ ]*: $q\$|\1|p" | head -1)
      if [ -n "$owner" ]; then
        printf '%s\t%s\n' "$owner" "$(dpkg-query -W -f='${Version}' "$owner:$arch" 2>/dev/null ||
                                    dpkg-query -W -f='${Version}' "$owner")"
        return 0
      fi
    done
  done
  return 1
}
linked=$(ldd "$A3S_CLI" | sed -n 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p')
check "ldd shows what the CLI links" test -n "$linked"
: >"$w/expected"
for l in $linked; do
  if pkg_of "$l" >>"$w/expected"; then :; else fail "a Debian package owns $l"; fi
done
# ... and the archives its link takes from the system (Lua, libseccomp, jansson, nettle
# where the build links them statically): named in its link command.
for a in $(tr ' ' '\n' <"$build/CMakeFiles/a3s-sandbox.dir/link.txt" | grep '^/.*\.a$' || true); do
  if pkg_of "$a" >>"$w/expected"; then :; else fail "a Debian package owns $a"; fi
done
check "the linked libraries' packages found ($(cut -f1 "$w/expected" | sort -u | tr '\n' ' '))" \
  test -s "$w/expected"
# The libc.a each static helper's link takes: the compiler's, or musl's where the link
# command gives musl's specs (CMakeLists.txt, A3S_MUSL_HELPERS).
static_pkg=""
for h in launch relay; do
  specs=$(tr ' ' '\n' <"$build/CMakeFiles/a3s-sandbox-$h.dir/link.txt" | sed -n 's/^-specs=//p' | head -1)
  # Which libc.a a static link with these options takes, from a link of the spec's own.
  libc_a=$(printf 'int main(void) { return 0; }\n' |
           ${CC:-cc} ${specs:+-specs="$specs"} -static -x c - -o "$w/libc-probe" -Wl,-t 2>&1 |
           sed -n 's|^(\(/[^)]*/libc\.a\)).*$|\1|p; s|^\(/[^ ]*/libc\.a\)$|\1|p' | head -1)
  pkg=$(pkg_of "$libc_a" | cut -f1)
  check "a3s-sandbox-$h: the static libc's package found ($libc_a: $pkg)" test -n "$pkg"
  static_pkg="$static_pkg${static_pkg:+,}a3s-sandbox-$h=$pkg"
done

# The checker: prints one line per problem, exits 1 when there is any.
cat >"$w/check.py" <<'PY'
import hashlib, json, os, re, sys
doc, build, cli_version, expected, static_pkg = sys.argv[1:6]
bad = []
try:
    d = json.load(open(doc))
except ValueError as e:
    sys.exit(f"not JSON: {e}")
def need(cond, what):
    if not cond:
        bad.append(what)
need(d.get("bomFormat") == "CycloneDX", "bomFormat is CycloneDX")
need(d.get("specVersion") == "1.5", "specVersion is 1.5")
need(re.fullmatch(r"urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                  str(d.get("serialNumber"))), "serialNumber is a urn:uuid")
need(isinstance(d.get("version"), int) and d["version"] >= 1, "version is a positive integer")
m = d.get("metadata", {})
need(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", str(m.get("timestamp"))), "metadata.timestamp")
need(m.get("tools", {}).get("components"), "metadata.tools.components")
root = m.get("component", {})
need(root.get("name") == "a3s-sandbox" and root.get("version") == cli_version,
     f"metadata.component is a3s-sandbox {cli_version}")
comps = d.get("components", [])
need(comps, "components")
for c in comps:
    for k in ("type", "name", "version", "purl", "bom-ref"):
        need(isinstance(c.get(k), str) and c[k], f"component {c.get('name')} has {k}")
    need(str(c.get("purl", "")).startswith("pkg:"), f"component {c.get('name')}: purl is pkg:...")
refs = [root.get("bom-ref")] + [c.get("bom-ref") for c in comps]
need(len(refs) == len(set(refs)), "bom-refs are unique")
deps = d.get("dependencies", [])
dep_of = {}
for e in deps:
    need(e.get("ref") in refs, f"dependency ref {e.get('ref')} exists")
    need(e.get("ref") not in dep_of, f"one dependencies entry for {e.get('ref')}")
    dep_of[e.get("ref")] = e.get("dependsOn", [])
    for t in e.get("dependsOn", []):
        need(t in refs, f"dependsOn {t} (of {e.get('ref')}) exists")
need(set(refs) <= set(dep_of), "every component has a dependencies entry")
by_name = {c["name"]: c for c in comps if "name" in c}
def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()
def hash_of(c):
    return [h["content"] for h in c.get("hashes", []) if h.get("alg") == "SHA-256"]
own = ["a3s-sandbox", f"liba3s_sandbox.so.{cli_version}", "a3s_sandbox.so"]
helpers = ["a3s-sandbox-launch", "a3s-sandbox-relay", "a3s-sandbox-mediator"]
for f in own:
    c = by_name.get(f)
    need(c and hash_of(c) == [sha(os.path.join(build, f))], f"{f}: its SHA-256")
    for h in helpers:
        need(c and by_name.get(h) and by_name[h]["bom-ref"] in dep_of.get(c["bom-ref"], []),
             f"{f} depends on the helper it embeds, {h}")
for h in helpers:
    c = by_name.get(h)
    need(c and hash_of(c) == [sha(os.path.join(build, "images", h))], f"{h}: the embedded image's SHA-256")
cli = by_name.get("a3s-sandbox", {})
for line in open(expected):
    name, version = line.rstrip("\n").split("\t")
    c = by_name.get(name)
    need(c and c["version"] == version, f"linked package {name} {version} is a component")
    need(c and c.get("purl", "").startswith(f"pkg:deb/debian/{name}@") and "arch=" in c.get("purl", ""),
         f"linked package {name}: purl pkg:deb/debian/{name}@...?arch=")
    need(c and c["bom-ref"] in dep_of.get(cli.get("bom-ref"), []), f"the CLI depends on {name}")
for h, pkg in (x.split("=") for x in static_pkg.split(",")):
    s = by_name.get(pkg)
    need(s and by_name.get(h) and s["bom-ref"] in dep_of.get(by_name[h]["bom-ref"], []),
         f"the static {h} depends on {pkg}")
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
PY
version=$("$A3S_CLI" --version | awk '{print $NF}')
sbom_ok() { python3 "$w/check.py" "$1" "$build" "$version" "$w/expected" "$static_pkg"; }
out=$(sbom_ok "$w/sbom.json" 2>&1)
check "the SBOM passes every check: $out" eq "$?" 0
check "SOURCE_DATE_EPOCH is the timestamp" eq \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["timestamp"])' "$w/sbom.json")" \
  "2023-11-14T22:13:20Z"

# Made twice with the same SOURCE_DATE_EPOCH: equal but for the serial number.
SOURCE_DATE_EPOCH=1700000000 bash "$gen" "$build" >"$w/again.json" 2>/dev/null
check "to stdout without OUT" eq "$?" 0
same() {
  python3 -c 'import json,sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert a.pop("serialNumber") != b.pop("serialNumber"), "a fresh serialNumber each time"
assert a == b, "the same document"' "$1" "$2"
}
check "made again: the same document, a new serialNumber" same "$w/sbom.json" "$w/again.json"

# The checker fails on what it checks: each broken copy must be refused.
broken() { # WHAT PYTHON-STATEMENT (on d)
  python3 -c "import json,sys
d = json.load(open(sys.argv[1]))
$2
json.dump(d, open(sys.argv[2], 'w'))" "$w/sbom.json" "$w/broken.json"
  out=$(sbom_ok "$w/broken.json" 2>&1)
  check "a broken SBOM ($1) is caught: ${out%%$'\n'*}" eq "$?" 1
}
broken "duplicate bom-ref" 'd["components"][1]["bom-ref"] = d["components"][0]["bom-ref"]'
broken "dangling dependsOn" 'd["dependencies"][0]["dependsOn"].append("pkg:deb/debian/nothing@1")'
broken "no purl" 'del d["components"][-1]["purl"]'
broken "a serial number that is no urn:uuid" 'd["serialNumber"] = "1234"'
# (left out everywhere, so that only the check against ldd can see it)
broken "a linked library left out" 'gone = lambda r: r.startswith("pkg:deb/debian/libseccomp")
d["components"] = [c for c in d["components"] if not gone(c["bom-ref"])]
d["dependencies"] = [dict(e, dependsOn=[t for t in e["dependsOn"] if not gone(t)])
                     for e in d["dependencies"] if not gone(e["ref"])]'
broken "a wrong hash" 'd["components"][0]["hashes"][0]["content"] = "0" * 64'

out=$(bash "$gen" "$w" 2>&1)
check "not a build directory: refused" test "$?" -ne 0
check "... saying so" contains "$out" "is not a build directory"
finish
