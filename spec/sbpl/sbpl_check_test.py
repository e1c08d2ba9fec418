#!/usr/bin/env python3
"""The SBPL checker (sbpl_check.py): its reader follows SBPL's semantics, every golden
profile (spec/golden/sbpl/*.sb, made by spec/unit/test_sbpl_golden.c from a fixed
workspace) passes it, and broken profiles fail it: each one below is the baseline's
golden profile with one thing wrong."""
import glob
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sbpl_check  # noqa: E402

SRC = os.environ.get("A3S_SOURCE_DIR") or os.path.join(os.path.dirname(__file__), "..", "..")
GOLDEN = os.path.join(SRC, "spec", "golden", "sbpl")
W, S, H, T = "/g/workspace", "/g/scratch", "/g/home", "/g/tmp"

# The fixture of test_sbpl_golden.c, as paths the golden profiles must guard.
HOSTILE = W + '/.env") (allow default) ;\\[x]*\n(allow network*)'
PROTECTED = [W + "/.git", W + "/.GIT", W + "/.Git/config", W + "/.repo/main", W + "/.vscode",
             W + "/.a3s", W + "/.idea", W + "/.GITMODULES", W + "/.bashrc",
             W + "/vendor/lib/.git"]
SECRETS = [W + "/.env", W + "/src/.ENV.local", W + "/node_modules/.env", HOSTILE,
           W + "/notes.txt", W + "/notes-link.txt", W + "/src/new/.env.production",
           W + "/.NETRC", W + "/pkg/.npmrc", H + "/.ssh/id_rsa", H + "/.aws/credentials",
           "/etc/shadow", "/private/etc/shadow", "/etc/sudoers.d/x"]
EXTRA_PROTECTED = {"strict-ci": [W + "/.github", W + "/.GitHub/workflows/x.yml", W + "/ci",
                                 W + "/.gitlab-ci.yml"]}


def golden_text(name):
    with open(os.path.join(GOLDEN, name + ".sb"), encoding="utf-8",
              errors="surrogateescape") as f:
        text = f.read()
    for frm, to in (("@WORKSPACE@", W), ("@SCRATCH@", S), ("@HOME@", H), ("@TMP@", T)):
        text = text.replace(frm, to)
    return text


def problems(text, policy="baseline"):
    review = policy == "review"
    writable = [S + "/x"] + ([] if review else [W + "/src/main.c", W + "/.a3s/loops/x"])
    read_only = [W + "/src/main.c", W + "/.a3s/loops/x"] if review else []
    return sbpl_check.check(text, W, S, writable, read_only,
                            PROTECTED + EXTRA_PROTECTED.get(policy, []), SECRETS)


class Reader(unittest.TestCase):
    def test_last_match_wins(self):
        p = sbpl_check.Profile('(version 1)(deny default)(allow file-read* (subpath "/a"))'
                               '(deny file-read* (literal "/a/b"))')
        self.assertTrue(p.allowed("file-read-data", "/a/c"))
        self.assertFalse(p.allowed("file-read-data", "/a/b"))
        self.assertFalse(p.allowed("file-read-data", "/ab"), "subpath matches components")
        self.assertFalse(p.allowed("file-write-data", "/a/c"))

    def test_no_default_allows(self):
        p = sbpl_check.Profile("(version 1)")
        self.assertTrue(p.allowed("file-write-data", "/"))

    def test_strings(self):
        p = sbpl_check.Profile('(version 1)(deny default)(allow file-read* (literal "/a\\"b\\\\c"))')
        self.assertTrue(p.allowed("file-read-data", '/a"b\\c'))
        for bad in ('(version 1)(allow file-read* (literal "/a\\n"))', '(version 1)(allow',
                    '(version 1))', '(version 2)', '(version 1)(allow default (literal "x)'):
            with self.assertRaises(sbpl_check.ParseError, msg=bad):
                sbpl_check.Profile(bad)

    def test_regex_and_unknown_filters(self):
        p = sbpl_check.Profile('(version 1)(deny default)(allow file-read* (subpath "/"))'
                               '(deny file-read* (regex "^/w/(.*/)?\\\\.[eE][nN][vV][^/]*(/|$)"))'
                               '(allow file-write* (vnode-type REGULAR-FILE))'
                               '(deny file-read* (vnode-type DIRECTORY))')
        self.assertFalse(p.allowed("file-read-data", "/w/a/b/.ENV.x"))
        self.assertTrue(p.allowed("file-read-data", "/w/a/env"))
        self.assertTrue(p.allowed("file-write-data", "/x"), "an unknown allow filter matches")
        self.assertTrue(p.allowed("file-read-data", "/d"), "an unknown deny filter does not")


class Golden(unittest.TestCase):
    def test_every_golden_profile_passes(self):
        files = sorted(glob.glob(os.path.join(GOLDEN, "*.sb")))
        self.assertGreaterEqual(len(files), 4)
        for f in files:
            name = os.path.basename(f)[:-3]
            with self.subTest(policy=name):
                self.assertEqual(problems(golden_text(name), name), [])


class Broken(unittest.TestCase):
    def rejected(self, text, why):
        found = problems(text)
        self.assertTrue(any(why in p for p in found), "%r not in %r" % (why, found))

    def test_baseline_passes(self):
        self.assertEqual(problems(golden_text("baseline")), [])

    def test_allow_default(self):
        self.rejected(golden_text("baseline") + "(allow default)\n", "allowed")

    def test_no_deny_default(self):
        self.rejected(golden_text("baseline").replace("(deny default)\n", ""),
                      "no (deny default)")

    def test_write_to_root(self):
        self.rejected(golden_text("baseline") + '(allow file-write* (subpath "/"))\n',
                      "a write allowed outside")

    def test_write_by_pattern(self):
        self.rejected(golden_text("baseline") + '(allow file-write-data (regex "^/g/w"))\n',
                      "a write allowed outside")

    def test_write_to_a_sibling(self):
        self.rejected(golden_text("baseline") +
                      '(allow file-write* (subpath "/g/workspace-sibling"))\n',
                      "a write allowed outside")

    def test_secret_reexposed(self):
        self.rejected(golden_text("baseline") + '(allow file-read* (subpath "/g/workspace"))\n',
                      "allowed on secret")

    def test_masks_before_the_allows(self):
        text = golden_text("baseline")
        head, sep, rest = text.partition("; Secrets and masks")
        masks, sep2, tail = rest.partition("; No network")
        plan_start = head.index("; The plan's rules")
        moved = head[:plan_start] + sep + masks + head[plan_start:] + sep2 + tail
        self.rejected(moved, "allowed on secret")

    def test_protected_writable(self):
        self.rejected(golden_text("baseline") +
                      '(allow file-write* (subpath "/g/workspace/.git"))\n',
                      "allowed on protected")

    def test_case_variant_writable(self):
        text = golden_text("baseline").replace(
            '(deny file-write* (regex "^/g/workspace/\\\\.[gG][iI][tT](/|$)"))\n', "")
        self.rejected(text, "allowed on protected '/g/workspace/.GIT")

    def test_unix_socket(self):
        self.rejected(golden_text("baseline") +
                      "(allow network-outbound (remote unix-socket))\n", "remote unix-socket")

    def test_network(self):
        self.rejected(golden_text("baseline") + "(allow network*)\n", "network-outbound")

    def test_unescaped_name(self):
        text = golden_text("baseline").replace('.env\\") (allow default)', '.env") (allow default)')
        self.assertNotEqual(text, golden_text("baseline"))
        self.assertTrue(problems(text), "a name that ends its string early is caught")


if __name__ == "__main__":
    unittest.main()
