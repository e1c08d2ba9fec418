#!/usr/bin/env bash
# A CycloneDX 1.5 JSON SBOM of a build:
#   scripts/generate-sbom.sh [BUILD_DIR] [OUT]     (default build/; OUT default stdout)
# Components: the project's own built files (the CLI and its session client, the shared
# and static libraries, the Lua module, the three helper programs that the CLI and the
# libraries embed), each
# with its SHA-256, and the Debian packages that provided what they link, read from the
# actual link: `ldd` of every dynamic file, `dpkg-query -S` for the owning package and
# `dpkg-query -W` for its version. Every file is also linked again from the build's own
# link command with the linker's trace (-t -t: the archive members it took), to a
# temporary file that must come out byte-identical to the built one: the packages of the
# archives and start files it used (libc.a and the start files of musl-dev, or of libc6-dev
# where musl is not installed, and libgcc.a of libgcc-N-dev for the static helpers; liblua5.4.a, libseccomp.a, libjansson.a and libnettle.a of their
# -dev packages for the CLI, which links them statically where they are found) are
# theirs. Which own file embeds which helper is found by looking for
# the helper's stripped image in its bytes. Needs python3 (standard library), dpkg, ldd.
# SOURCE_DATE_EPOCH, when set, is the timestamp (a reproducible document).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build}
out=${2:--}
[ -f "$build/CMakeCache.txt" ] || { echo "generate-sbom: $build is not a build directory (scripts/build.sh)" >&2; exit 1; }
[ -x "$build/a3s-sandbox" ] || { echo "generate-sbom: no $build/a3s-sandbox: build first (scripts/build.sh)" >&2; exit 1; }

python3 - "$build" "$out" "$here" <<'PY'
import hashlib, json, os, re, shlex, subprocess, sys, tempfile, time, urllib.parse, uuid

build, out, src = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3]

def die(msg):
    sys.exit("generate-sbom: " + msg)

def cmd(argv, cwd=None, check=True):
    r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if check and r.returncode != 0:
        die(f"{' '.join(argv)} failed: {r.stderr.strip()[:400]}")
    return r

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()

cache = {}
with open(os.path.join(build, "CMakeCache.txt")) as f:
    for line in f:
        m = re.match(r"^([A-Za-z0-9_]+):[A-Z]+=(.*)$", line.rstrip("\n"))
        if m:
            cache[m.group(1)] = m.group(2)

# The version, three ways, which must agree: CMake's project version, `--version`, and
# the capability report's "version".
version = cache.get("CMAKE_PROJECT_VERSION", "")
cli = os.path.join(build, "a3s-sandbox")
said = cmd([cli, "--version"]).stdout.split()
with tempfile.TemporaryDirectory() as ws:  # the report's workspace: any empty directory
    caps = json.loads(cmd([cli, "capabilities", "-w", ws]).stdout)
if not version or said[-1:] != [version] or caps.get("version") != version:
    die(f"the versions disagree: CMake {version!r}, --version {said!r}, "
        f"capabilities {caps.get('version')!r}")

arch = cmd(["dpkg", "--print-architecture"]).stdout.strip()
distro = ""
try:
    osr = dict(l.rstrip("\n").split("=", 1) for l in open("/etc/os-release") if "=" in l)
    distro = f"{osr.get('ID', '').strip(chr(34))}-{osr.get('VERSION_ID', '').strip(chr(34))}"
except OSError:
    pass

# The project's own files, in the build directory. Anything else there that looks like a
# program or library of the project is an error: an SBOM that misses a file is worse
# than none.
helpers = ["a3s-sandbox-launch", "a3s-sandbox-relay", "a3s-sandbox-mediator"]
shared = f"liba3s_sandbox.so.{version}"
own = [  # file, type, what it is, installed
    ("a3s-sandbox", "application", "the command-line program", True),
    ("a3s-sandbox-exec", "application", "the session client (`a3s-sandbox session exec` as a "
     "static program of its own)", True),
    (shared, "library", "the C library (public API: a3s_sandbox.h)", True),
    ("a3s_sandbox.so", "library", "the Lua module (require \"a3s_sandbox\")", True),
    ("liba3s_core.a", "library", "static library of the layers, linked into the CLI and the Lua module", False),
    ("liba3s_engine_only.a", "library", "static library of the engine alone (its unit tests)", False),
    ("a3s-embed-policies", "application", "build-time generator of the shipped policies' text "
     "and compiled chunks, built into the CLI and the libraries (never installed)", False),
] + [(h, "application", "helper program, embedded in the CLI and the libraries", False)
     for h in helpers]
known = {f for f, *_ in own} | {"liba3s_sandbox.so", "liba3s_sandbox.so.0"}
for name in sorted(os.listdir(build)):
    if re.match(r"^(a3s|liba3s)[-_.A-Za-z0-9]*$", name) and os.path.isfile(os.path.join(build, name)) \
       and (name.endswith((".a", ".so")) or ".so." in name or os.access(os.path.join(build, name), os.X_OK)) \
       and name not in known:
        die(f"{name} in {build} is not described by this script: add it")
for f, *_ in own:
    if not os.path.isfile(os.path.join(build, f)):
        die(f"missing built file {build}/{f}")

def purl_deb(name, ver, a):
    q = [("arch", a)] + ([("distro", distro)] if distro else [])
    return (f"pkg:deb/debian/{name}@{urllib.parse.quote(ver, safe='')}?"
            + "&".join(f"{k}={urllib.parse.quote(v, safe='')}" for k, v in q))

packages = {}  # bom-ref -> component
def package_of(path):
    """The Debian package that installed path, as a component (its bom-ref)."""
    real = os.path.realpath(path)
    tries = []
    for p in (path, real):
        tries += [p, p[4:] if p.startswith("/usr/") else "/usr" + p]
    for p in dict.fromkeys(tries):
        r = cmd(["dpkg-query", "-S", p], check=False)
        for line in r.stdout.splitlines():
            owners, _, found = line.rpartition(": ")
            if found != p or owners.startswith("diversion"):
                continue
            owner = [o.strip() for o in owners.split(",")]
            owner = [o for o in owner if o.endswith(":" + arch)] or owner
            pkg = owner[0]
            fields = cmd(["dpkg-query", "-W", "-f",
                          "${Package}\t${Version}\t${Architecture}\t${source:Package}\t${source:Version}",
                          pkg]).stdout.split("\t")
            name, ver, a, srcpkg, srcver = fields
            purl = purl_deb(name, ver, a)
            c = packages.setdefault(purl, {
                "type": "library", "bom-ref": purl, "name": name, "version": ver,
                "purl": purl, "properties": [
                    {"name": "a3s:debian:source", "value": f"{srcpkg} {srcver}"}]})
            files = {p["value"] for p in c["properties"] if p["name"] == "a3s:file"}
            if real not in files:
                c["properties"].append({"name": "a3s:file", "value": real})
            return purl
    die(f"no Debian package owns {path} ({real}): the SBOM cannot name where it came from")

def ldd_deps(path):
    """The packages of what the dynamic loader maps for path; None for a static file."""
    r = cmd(["ldd", path], check=False)
    if "not a dynamic executable" in r.stdout + r.stderr:
        return None
    if r.returncode != 0:
        die(f"ldd {path}: {r.stderr.strip()}")
    refs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        m = re.match(r"^(\S+) => (\S+) \(0x[0-9a-f]+\)$", line) or \
            re.match(r"^()(/\S+) \(0x[0-9a-f]+\)$", line)
        if m:
            refs.append(package_of(m.group(2)))
        elif "=> not found" in line:
            die(f"ldd {path}: {line}")
        # linux-vdso.so.1 and the like: the kernel's, no file.
    return refs

def static_deps(name):
    """The packages of the archives and objects a file was linked from statically: its
    link command again, traced, to a temporary file that must equal the built one."""
    argv = None
    for target in sorted(os.listdir(os.path.join(build, "CMakeFiles"))):
        link = os.path.join(build, "CMakeFiles", target, "link.txt")
        if os.path.isfile(link):
            with open(link) as lf:
                words = shlex.split(lf.read())
            if "-o" in words and words[words.index("-o") + 1] == name:
                argv = words
    if argv is None:
        die(f"no link command makes {name} (a Makefile build is needed to trace its link)")
    with tempfile.TemporaryDirectory() as tmp:
        out_file = os.path.join(tmp, name)
        argv[argv.index("-o") + 1] = out_file
        r = cmd(argv + ["-Wl,-t,-t"], cwd=build)
        identical = sha256(out_file) == sha256(os.path.join(build, name))
    if not identical:
        die(f"relinking {name} did not give the built file: rebuild (scripts/build.sh) first")
    used = []
    for line in r.stdout.splitlines():
        m = re.match(r"^\((.+)\)[^()]+$", line)  # (archive)member: a member taken
        path = m.group(1) if m else line.strip()
        if not path.startswith("/") or not (m or path.endswith(".o")):
            continue  # the build's own objects; an archive named with nothing taken from it
        used.append(os.path.normpath(path))
    refs = []
    for path in dict.fromkeys(used):
        ref = package_of(path)
        if ref not in refs:
            refs.append(ref)
    return refs

components, dependencies = [], []
images = {}
for h in helpers:
    img = os.path.join(build, "images", h)
    if not os.path.isfile(img):
        die(f"missing the embedded image {img}")
    with open(img, "rb") as f:
        images[h] = f.read()
ref_of = {f: f"a3s-sandbox/{f}@{version}" for f, *_ in own}
for f, ctype, what, installed in own:
    path = os.path.join(build, f)
    props = [{"name": "a3s:role", "value": what},
             {"name": "a3s:installed", "value": "true" if installed else "false"}]
    digest = sha256(path)
    if f in images:
        # What ships is the stripped image inside the CLI and the libraries.
        props.append({"name": "a3s:build-file-sha256", "value": digest})
        digest = hashlib.sha256(images[f]).hexdigest()
        props.append({"name": "a3s:embedded-image", "value": f"images/{f} (stripped)"})
    components.append({
        "type": ctype, "bom-ref": ref_of[f], "name": f, "version": version,
        "purl": f"pkg:generic/a3s-sandbox/{f}@{version}",
        "hashes": [{"alg": "SHA-256", "content": digest}],
        "licenses": [{"license": {"id": "MIT"}}], "properties": props})
    deps = []
    if not f.endswith(".a"):
        # What the loader maps, and what the link took from archives (a static helper's
        # libc, the CLI's Lua, libseccomp, jansson and nettle where they are static).
        dyn = ldd_deps(path)
        deps += (dyn or []) + [r for r in static_deps(f) if r not in (dyn or [])]
        props.append({"name": "a3s:linkage",
                      "value": "static (link traced and reproduced)" if dyn is None
                      else "dynamic, with archives (link traced and reproduced)"})
    with open(path, "rb") as fh:
        data = fh.read()
    deps += [ref_of[h] for h in helpers if h != f and images[h] in data]
    # The project's static libraries that the build's link command of f names.
    for target in os.listdir(os.path.join(build, "CMakeFiles")):
        link_txt = os.path.join(build, "CMakeFiles", target, "link.txt")
        if not os.path.isfile(link_txt):
            continue
        with open(link_txt) as lf:
            words = shlex.split(lf.read())
        if "-o" in words and words[words.index("-o") + 1] == f:
            deps += [ref_of[w] for w in words if w.endswith(".a") and w in ref_of]
    dependencies.append({"ref": ref_of[f], "dependsOn": sorted(dict.fromkeys(deps))})

components += sorted(packages.values(), key=lambda c: c["name"])
for ref in sorted(packages):
    dependencies.append({"ref": ref, "dependsOn": []})
root = f"a3s-sandbox@{version}"
dependencies.insert(0, {"ref": root, "dependsOn": [ref_of[f] for f, *_ in own]})

def tool(name, argv):
    r = cmd(argv, check=False)
    m = re.search(r"(\d+(?:\.\d+)+[^\s)]*)", (r.stdout + r.stderr).split("\n")[0])
    return {"type": "application", "name": name, "version": m.group(1) if m else "unknown"}

epoch = os.environ.get("SOURCE_DATE_EPOCH")
stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(epoch) if epoch else time.time()))
meta_props = [{"name": "a3s:build-type", "value": cache.get("CMAKE_BUILD_TYPE", "")},
              {"name": "a3s:c-compiler", "value": cache.get("CMAKE_C_COMPILER", "") + ": " +
               cmd([cache.get("CMAKE_C_COMPILER", "cc"), "--version"]).stdout.split("\n")[0]}]
git = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True, text=True)
if git.returncode == 0:
    dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip() != ""
    meta_props.append({"name": "a3s:source-commit",
                       "value": git.stdout.strip() + (" (with uncommitted changes)" if dirty else "")})
bom = {
    "bomFormat": "CycloneDX",
    "specVersion": "1.5",
    "serialNumber": f"urn:uuid:{uuid.uuid4()}",
    "version": 1,
    "metadata": {
        "timestamp": stamp,
        "lifecycles": [{"phase": "build"}],
        "tools": {"components": [
            {"type": "application", "name": "generate-sbom.sh", "version": version,
             "description": "a3s-sandbox scripts/generate-sbom.sh"},
            tool("dpkg", ["dpkg-query", "--version"]),
            tool("ldd", ["ldd", "--version"]),
            tool("python3", ["python3", "--version"])]},
        "component": {"type": "application", "bom-ref": root, "name": "a3s-sandbox",
                      "version": version, "purl": f"pkg:generic/a3s-sandbox@{version}",
                      "description": "fail-closed command sandbox for Linux with Lua policies",
                      "licenses": [{"license": {"id": "MIT"}}]},
        "properties": meta_props,
    },
    "components": components,
    "dependencies": dependencies,
}
text = json.dumps(bom, indent=2) + "\n"
if out == "-":
    sys.stdout.write(text)
else:
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, out)
PY
