#!/usr/bin/env python3
"""An SBPL reader and checker (python3 standard library only).

Reads a Seatbelt profile (the S-expressions `sandbox-exec -p` takes) and answers "would
this operation on this path be allowed" with SBPL's semantics: the rules are read in
order and the last one that matches decides; a profile without a matching rule allows
(so a profile must say `(deny default)`). Then checks what a3s-sandbox promises of a
profile (backends/macos/README.md):

  - (version 1) first, (deny default), nothing allowed by default;
  - file writes only below the workspace and the scratch dir (and to /dev/null, /dev/zero);
  - protected paths not writable, secret paths neither readable nor writable;
  - no network at all, Unix sockets included.

Conservative where it cannot tell: an unknown filter in an allow rule counts as matching,
in a deny rule as not matching; an unknown string escape or form is a parse error.

    sbpl_check.py PROFILE --workspace W --scratch S [--writable P]... [--read-only P]...
                  [--protected P]... [--secret P]... [--subst FROM=TO]...

exits 0 ("ok: ..."), or 1 with one line per problem.
"""
import argparse
import re
import sys

SINKS = ("/dev/null", "/dev/zero")


class ParseError(Exception):
    pass


class Sym(str):
    """A symbol."""


class Str(str):
    """A string literal."""


LP, RP = object(), object()  # parentheses, distinct from any string


def tokens(text):
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif c == ";":
            while i < n and text[i] != "\n":
                i += 1
        elif c in "()":
            yield LP if c == "(" else RP
            i += 1
        elif c == '"':
            i += 1
            out = []
            while True:
                if i >= n:
                    raise ParseError("unterminated string")
                c = text[i]
                if c == "\\":
                    if i + 1 >= n or text[i + 1] not in '"\\':
                        raise ParseError("unknown string escape at %d" % i)
                    out.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    out.append(c)
                    i += 1
            yield Str("".join(out))
        elif c == "#":
            raise ParseError("#-literals are not read here (at %d)" % i)
        else:
            j = i
            while j < n and text[j] not in ' \t\r\n();"':
                j += 1
            word = text[i:j]
            yield int(word) if word.isdigit() else Sym(word)
            i = j


def parse(text):
    """The top-level forms, as nested lists of Sym, str and int."""
    stack = [[]]
    for t in tokens(text):
        if t is LP:
            stack.append([])
        elif t is RP:
            if len(stack) == 1:
                raise ParseError("unbalanced ')'")
            form = stack.pop()
            stack[-1].append(form)
        else:
            if len(stack) == 1:
                raise ParseError("an atom at top level: %r" % (t,))
            stack[-1].append(t)
    if len(stack) != 1:
        raise ParseError("unbalanced '('")
    return stack[0]


def within(path, root):
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


class Rule:
    def __init__(self, action, ops, filters):
        self.action, self.ops, self.filters = action, ops, filters

    def op_matches(self, op):
        for o in self.ops:
            if o == "default" or o == op:
                return True
            if o.endswith("*") and op.startswith(o[:-1]):
                return True
        return False

    def filter_matches(self, f, op, path, remote, name):
        kind = f[0] if f and isinstance(f[0], Sym) else None
        arg = f[1] if len(f) > 1 else None
        if kind in ("subpath", "literal", "regex"):
            if not isinstance(arg, Str) or len(f) != 2:
                raise ParseError("bad filter %r" % (f,))
            if path is None:
                return False
            if kind == "subpath":
                return within(path, arg)
            if kind == "literal":
                return path == arg
            return re.search(arg, path, re.DOTALL) is not None
        if kind == "global-name":
            return name is not None and op == "mach-lookup" and name == arg
        if kind == "target" and arg == "same-sandbox":
            return op == "signal"
        if kind == "remote" and isinstance(arg, Sym):
            return remote is not None and (arg == remote or arg == "ip" and remote != "unix-socket")
        # Not understood: assume the worst for the rule's action.
        return self.action == "allow"

    def matches(self, op, path=None, remote=None, name=None):
        if not self.op_matches(op):
            return False
        if not self.filters:
            return True
        return any(self.filter_matches(f, op, path, remote, name) for f in self.filters)


class Profile:
    def __init__(self, text):
        forms = parse(text)
        if not forms or forms[0] != [Sym("version"), 1]:
            raise ParseError("the first form is not (version 1)")
        self.rules = []
        for f in forms[1:]:
            if not f or f[0] not in ("allow", "deny"):
                raise ParseError("not a rule: %r" % (f,))
            ops = [x for x in f[1:] if isinstance(x, Sym)]
            filters = [x for x in f[1:] if isinstance(x, list)]
            if not ops or len(ops) + len(filters) != len(f) - 1:
                raise ParseError("bad rule: %r" % (f,))
            self.rules.append(Rule(str(f[0]), ops, filters))

    def decide(self, op, path=None, remote=None, name=None):
        """'allow' or 'deny': the last matching rule's action; allow when none matches."""
        decision = "allow"
        for r in self.rules:
            if r.matches(op, path, remote, name):
                decision = r.action
        return decision

    def allowed(self, op, path=None, remote=None, name=None):
        return self.decide(op, path, remote, name) == "allow"


WRITE_OPS = ("file-write-data", "file-write-create", "file-write-unlink", "file-write-mode")
READ_OPS = ("file-read-data", "file-read-metadata")


def check(text, workspace, scratch, writable=(), read_only=(), protected=(), secrets=()):
    """The problems of a profile (empty: none)."""
    try:
        p = Profile(text)
    except ParseError as e:
        return ["does not parse: %s" % e]
    problems = []

    def expect(ok, what):
        if not ok:
            problems.append(what)

    # Deny by default: operations nothing allows stay denied.
    expect(any(r.action == "deny" and r.ops == ["default"] and not r.filters for r in p.rules),
           "no (deny default)")
    for op in ("iokit-open", "mach-register", "sysctl-write", "process-info-dirtycontrol",
               "file-write-data", "mach-lookup"):
        expect(not p.allowed(op, name="com.example.any") if op == "mach-lookup"
               else not p.allowed(op), "%s is allowed by default" % op)
    # Writes: every rule that allows one names only the workspace, the scratch dir or a
    # sink, and no pattern.
    for r in p.rules:
        if r.action != "allow" or not any(r.op_matches(op) for op in WRITE_OPS):
            continue
        if not r.filters:
            problems.append("a write allowed everywhere: %s" % r.ops)
        for f in r.filters:
            ok = (len(f) == 2 and f[0] in ("subpath", "literal") and isinstance(f[1], Str) and
                  (within(f[1], workspace) or within(f[1], scratch) or
                   (f[0] == "literal" and f[1] in SINKS)))
            expect(ok, "a write allowed outside the workspace and the scratch dir: %r" % (f,))
    for path in ("/", "/etc/passwd", "/usr/local/bin/x", "/tmp/x", "/private/tmp/x",
                 workspace.rsplit("/", 1)[0] + "/x", workspace + "-sibling/x",
                 scratch + "-sibling/x"):
        for op in WRITE_OPS:
            expect(not p.allowed(op, path), "%s allowed on %r" % (op, path))
    for path in writable:
        expect(p.allowed("file-write-data", path) and p.allowed("file-read-data", path),
               "not writable: %r" % path)
    for path in read_only:
        expect(p.allowed("file-read-data", path), "not readable: %r" % path)
    for path in list(read_only) + list(protected):
        for op in WRITE_OPS:
            for q in (path, path + "/x"):
                expect(not p.allowed(op, q), "%s allowed on protected %r" % (op, q))
    for path in secrets:
        for op in READ_OPS + WRITE_OPS:
            for q in (path, path + "/x"):
                expect(not p.allowed(op, q), "%s allowed on secret %r" % (op, q))
    # No network, Unix sockets included.
    for op in ("network-outbound", "network-inbound", "network-bind"):
        for remote in ("unix-socket", "tcp", "udp", "ip", None):
            expect(not p.allowed(op, remote=remote), "%s allowed (remote %s)" % (op, remote))
    return problems


def main(argv):
    ap = argparse.ArgumentParser(description="Check a Seatbelt profile of a3s-sandbox.")
    ap.add_argument("profile")
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--scratch", required=True)
    for opt in ("writable", "read-only", "protected", "secret", "subst"):
        ap.add_argument("--" + opt, action="append", default=[])
    a = ap.parse_args(argv)
    with open(a.profile, "rb") as f:
        text = f.read().decode("utf-8", "surrogateescape")
    for s in a.subst:
        frm, _, to = s.partition("=")
        text = text.replace(frm, to)
    problems = check(text, a.workspace, a.scratch, a.writable, a.read_only, a.protected,
                     a.secret)
    for p in problems:
        print("%s: %s" % (a.profile, p))
    if problems:
        return 1
    print("ok: %s" % a.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
