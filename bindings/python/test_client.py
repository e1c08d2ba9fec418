"""Tests of a3s_sandbox_client against the real `a3s-sandbox serve` (unittest; the CLI
from $A3S_CLI or $A3S_SANDBOX_CLI). Exit 77 (skipped) where no sandbox can run."""
import os
import resource
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from a3s_sandbox_client import MAX_BUFFER, Cancelled, Client, Dropped, SandboxError  # noqa: E402

CLI = os.environ.get("A3S_CLI") or os.environ.get("A3S_SANDBOX_CLI") or "a3s-sandbox"
README = os.path.join(HERE, "..", "..", "README.md")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.ws = self.tmp.name
        self.sb = Client(workspace=self.ws, cli=CLI)

    def tearDown(self):
        if self.sb is not None:
            self.assertEqual(self.sb.close(), 0)
        self.tmp.cleanup()

    def in_thread(self, fn, seconds=120):
        """fn() in a thread of its own; a call that hangs fails the test (the client is
        then dropped, its server killed) instead of hanging the suite."""
        out = {}

        def run():
            try:
                out["value"] = fn()
            except BaseException as e:  # noqa: BLE001 (re-raised below)
                out["error"] = e
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(seconds)
        if t.is_alive():
            self.sb._proc.kill()
            self.sb = None
            self.fail("the call did not return within %d s (deadlocked)" % seconds)
        if "error" in out:
            raise out["error"]
        return out["value"]

    def test_readme_example(self):
        """The README's Python example is bindings/python/example.py, and it runs."""
        with open(os.path.join(HERE, "example.py")) as f:
            example = f.read()
        with open(README) as f:
            self.assertIn("```python\n" + example + "```\n", f.read())
        p = subprocess.run([sys.executable, os.path.join(HERE, "example.py")], cwd=self.ws,
                           env=dict(os.environ, PYTHONPATH=HERE, A3S_SANDBOX_CLI=CLI),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(sorted(lines[:2]), ["stderr b'oops\\n'", "stdout b'hello\\n'"])
        self.assertEqual(lines[2:], ["3 'hello\\n' baseline"])

    def test_exec_result_is_the_json_result(self):
        r = self.sb.exec(command="echo hi; exit 4", env={"X": "1"})
        self.assertEqual((r["exit_code"], r["stdout"], r["timed_out"]), (4, "hi\n", False))
        self.assertEqual(len(r["policy_digest"]), 64)

    def test_bytes_in_and_out_are_lossless(self):
        data = bytes(range(256)) * 64
        seen = []
        r = self.sb.exec(["cat"], stdin=data, on_output=lambda s, d: seen.append((s, d)))
        self.assertEqual(r["exit_code"], 0)
        self.assertEqual(b"".join(d for s, d in seen if s == "stdout"), data)

    def test_a_failing_callback_reaches_the_caller(self):
        def boom(stream, data):
            raise ValueError("from the callback")
        with self.assertRaisesRegex(ValueError, "from the callback"):
            self.sb.exec(["echo", "x"], on_output=boom)
        self.assertEqual(self.sb.exec(["echo", "y"])["stdout"], "y\n")  # still serving

    def test_a_callback_may_call_the_client(self):
        """on_output runs in the caller's thread, not the reader's: calls made from it are
        answered."""
        seen = []

        def cb(stream, data):
            seen.append(self.sb.probe()["backend"])
            seen.append(self.sb.exec(["echo", "inner"])["stdout"])

        r = self.in_thread(lambda: self.sb.exec(["echo", "outer"], on_output=cb), 60)
        self.assertEqual(r["stdout"], "outer\n")
        self.assertEqual(seen, ["linux-bwrap", "inner\n"])

    def test_unread_output_is_bounded(self):
        """start() with 200 MB of output nobody iterates: the client holds at most
        MAX_BUFFER of it (its peak RSS grows by far less than the output), and the
        iterator then says how many bytes were dropped; the result is whole."""
        size = 200 * 1000 * 1000
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
        ex = self.sb.start(command="head -c %d /dev/zero | tr '\\0' a" % size, timeout=600)
        r = self.in_thread(lambda: ex.result(timeout=600), 600)
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        self.assertEqual((r["exit_code"], r["total_bytes"]), (0, size))
        self.assertLess(grown * 1024, MAX_BUFFER + 64 * 1024 * 1024, "peak RSS grew by %d KiB" % grown)
        got = lost = 0
        for stream, data in ex:
            self.assertEqual(stream, "stdout")
            if isinstance(data, Dropped):
                lost += data
            else:
                got += len(data)
        self.assertLessEqual(got, MAX_BUFFER)
        self.assertGreater(lost, 0)
        self.assertEqual(got + lost, size)

    def test_start_iterate_and_result(self):
        ex = self.sb.start(command="echo one; echo two >&2")
        got = {}
        for stream, data in ex:
            got[stream] = got.get(stream, b"") + data
        self.assertEqual(got, {"stdout": b"one\n", "stderr": b"two\n"})
        self.assertEqual(ex.result()["exit_code"], 0)

    def test_threads_share_one_client(self):
        results = {}

        def run(i):
            results[i] = self.sb.exec(["sh", "-c", "echo $0", str(i)])["stdout"]

        ts = [threading.Thread(target=run, args=(i,)) for i in range(6)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(results, {i: "%d\n" % i for i in range(6)})

    def test_cancel_kills_the_exec(self):
        ex = self.sb.start(command="echo started; sleep 600")
        for stream, data in ex:
            if data == b"started\n":
                break
        self.assertTrue(ex.cancel())
        with self.assertRaises(Cancelled):
            ex.result(timeout=120)
        self.assertFalse(ex.cancel())  # it has ended

    def test_refusals_raise(self):
        with self.assertRaises(SandboxError) as e:
            self.sb.exec(["true"], grants=["example.org:443"], grant_digest="0" * 64)
        self.assertEqual(e.exception.code, "policy")
        with self.assertRaises(SandboxError) as e:
            self.sb.exec(["true"], cwd="/etc")
        self.assertEqual(e.exception.code, "invalid")

    def test_lines_the_server_cannot_name_raise_at_once(self):
        # Each of these would be refused with "id": null; the call raises instead of
        # waiting for an answer that names it (bounded by in_thread's limit).
        cases = [
            (dict(argv=["wc", "-c"], stdin=b"x" * (800 * 1024)), "too_large"),
            (dict(argv=["echo", "name-\udcff"]), "bad_request"),
            (dict(argv=["echo", "a\0b"]), "bad_request"),
            (dict(argv=["true"], timeout=float("inf")), "bad_request"),
            (dict(argv=["true"], timeout=float("nan")), "bad_request"),
            (dict(argv=["true"], timeout=2**64), "bad_request"),
            (dict(argv=["true"], env={1: "a", "1": "b"}), "bad_request"),
        ]
        for kw, code in cases:
            def call(kw=kw):
                with self.assertRaises(SandboxError) as e:
                    self.sb.exec(**kw)
                return e.exception.code
            self.assertEqual(self.in_thread(call, seconds=30), code)
        self.assertEqual(self.sb.exec(["echo", "still"])["stdout"], "still\n")

    def test_a_sender_never_stops_the_reader(self):
        # Execs that flood their output (until their 3 s deadline) fill the server's queue
        # of answers, so it stops reading requests; a big request then waits in the pipe.
        # Its sender must not hold up the reader that drains those answers.
        floods = [self.sb.start(command="head -c 2000000000 /dev/zero | tr '\\0' '\\1'",
                                timeout=3) for _ in range(12)]

        def send_big():
            for _ in range(4):
                self.sb.start(["true"], stdin=b"x" * 700000, timeout=5).result()
            return "sent"
        self.assertEqual(self.in_thread(send_big, seconds=90), "sent")
        for f in floods:
            self.assertTrue(f.result(timeout=60)["timed_out"])

    def test_a_refusal_without_an_id_fails_the_pending(self):
        # A line the client did not check (written here by hand) is refused with "id":
        # null: the requests pending then fail rather than wait forever.
        ex = self.sb.start(command="sleep 3")
        with self.sb._lock:
            self.sb._proc.stdin.write(b"{not json\n")
            self.sb._proc.stdin.flush()
        def wait():
            with self.assertRaises(SandboxError) as e:
                ex.result(timeout=30)
            return e.exception.code
        self.assertEqual(self.in_thread(wait, seconds=40), "bad_json")

    def test_other_ops(self):
        self.assertEqual(self.sb.probe()["backend"], "linux-bwrap")
        want = subprocess.run([CLI, "digest", "-w", self.ws], capture_output=True, text=True)
        self.assertEqual(self.sb.digest(), want.stdout.strip())
        self.assertIn("bwrap_argv", self.sb.plan())
        self.assertIsInstance(self.sb.capabilities(), dict)


def main():
    ws = tempfile.mkdtemp()
    try:
        probe = subprocess.run([CLI, "probe", "-w", ws], capture_output=True, text=True)
    finally:
        os.rmdir(ws)
    if probe.returncode != 0:
        print("SKIP: the sandbox boundary is unavailable here: " + probe.stderr.strip())
        sys.exit(1 if os.environ.get("A3S_MUST_WORK") == "1" else 77)
    unittest.main(verbosity=2)


if __name__ == "__main__":
    main()
