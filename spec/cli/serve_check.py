"""Checks of `a3s-sandbox serve` for serve_spec.sh, driven over its pipes with nothing but
the standard library: `python3 serve_check.py CASE WORKSPACE`. Exit 0 when the case
holds; otherwise the reason on stdout as '#' lines (TAP comments) and exit 1."""
import base64
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

CLI = os.environ["A3S_CLI"]


class Server:
    """One `a3s-sandbox serve`; its answers are read as whole lines (JSON each)."""

    def __init__(self, ws, *extra):
        self.p = subprocess.Popen([CLI, "serve", "-w", ws, *extra], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, obj_or_bytes):
        b = obj_or_bytes if isinstance(obj_or_bytes, bytes) else json.dumps(obj_or_bytes).encode()
        self.p.stdin.write(b + b"\n")
        self.p.stdin.flush()

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError("the server ended without answering; stderr: %r"
                                 % self.p.stderr.read()[:400])
        assert line.endswith(b"\n"), line[:200]
        return json.loads(line)

    def until_final(self, rid, events=None):
        """Messages up to the final one of request rid; the others kept in events."""
        while True:
            m = self.read()
            if m.get("id") == rid and "ok" in m:
                return m
            if events is not None:
                events.append(m)

    def close(self):
        self.p.stdin.close()
        rest = self.p.stdout.read()
        rc = self.p.wait(timeout=120)
        self.p.stderr.close()
        self.p.stdout.close()
        return rc, rest


def result_of(m):
    assert m.get("ok") is True, m
    return m["result"]


def stable(r):
    """A result without what differs per run."""
    return {k: v for k, v in r.items() if k not in ("execution_id", "duration_ms")}


# --- cases ------------------------------------------------------------------------------

def concurrent(ws):
    """Several execs in flight at once: the first waits for a file that only the last
    makes, so it can only finish when they run together; every result is its own."""
    s = Server(ws)
    n = 5
    s.send({"id": 0, "op": "exec", "timeout": 60,
            "command": "while [ ! -e go ]; do sleep 0.05; done; echo first"})
    for i in range(1, n):
        s.send({"id": i, "op": "exec", "argv": ["sh", "-c", "echo out-$0; echo err-$0 >&2; exit $0", str(i)]})
    s.send({"id": "last", "op": "exec", "command": "touch go; echo last"})
    finals = {}
    while len(finals) < n + 1:
        m = s.read()
        if "ok" in m:
            assert m["id"] not in finals, "two final messages for %r" % m["id"]
            finals[m["id"]] = result_of(m)
    r0 = finals[0]
    assert not r0["timed_out"] and r0["stdout"] == "first\n", r0
    for i in range(1, n):
        r = finals[i]
        assert (r["exit_code"], r["stdout"], r["stderr"]) == (i, "out-%d\n" % i, "err-%d\n" % i), r
    assert finals["last"]["stdout"] == "last\n"
    rc, rest = s.close()
    assert rc == 0 and rest == b"", (rc, rest)


def cancel(ws):
    """A cancel kills the exec's whole tree: its final message says cancelled, and no
    process of it is left on the host."""
    marker = "31337.%d" % os.getpid()
    s = Server(ws)
    s.send({"id": "long", "op": "exec", "timeout": 120,  # a cancel that fails: timed_out
            "command": "sleep %s & sh -c 'sleep %s' & echo started; wait" % (marker, marker)})
    events = []
    while not any(e.get("data") == "started\n" for e in events):
        events.append(s.read())
    s.send({"id": 9, "op": "cancel", "target": "long"})
    a = s.read()
    assert a == {"id": 9, "ok": True, "result": {"target": "long"}}, a
    f = s.until_final("long")
    assert f["ok"] is False and f["error"]["code"] == "cancelled", f
    left = subprocess.run(["pgrep", "-f", "sleep " + marker], capture_output=True, text=True)
    assert left.stdout == "", "processes left: %s" % left.stdout
    s.send({"id": 10, "op": "cancel", "target": "long"})
    a = s.read()
    assert a["ok"] is False and a["error"]["code"] == "not_found", a
    rc, _ = s.close()
    assert rc == 0, rc


def malformed_lines(rng):
    """1,000 request lines that are not valid requests (no '\\n' inside, none empty)."""
    good = {"id": 1, "op": "exec", "argv": ["true"], "env": {"A": "b"}, "timeout": 5}
    wrong = [
        {"op": "probe"}, {"id": None, "op": "probe"}, {"id": 1.5, "op": "probe"},
        {"id": [1], "op": "probe"}, {"id": {}, "op": "probe"}, {"id": True, "op": "probe"},
        {"id": "x" * 300, "op": "probe"}, {"id": 1}, {"id": 1, "op": 7},
        {"id": 1, "op": "nope"}, {"id": 1, "op": "PROBE"}, {"id": 1, "op": "exec"},
        {"id": 1, "op": "exec", "argv": []}, {"id": 1, "op": "exec", "argv": "ls"},
        {"id": 1, "op": "exec", "argv": [1]}, {"id": 1, "op": "exec", "argv": ["a"], "command": "b"},
        {"id": 1, "op": "exec", "command": 5}, {"id": 1, "op": "exec", "command": "x", "env": []},
        {"id": 1, "op": "exec", "command": "x", "env": {"A": 1}},
        {"id": 1, "op": "exec", "command": "x", "env": {"A=B": "c"}},
        {"id": 1, "op": "exec", "command": "x", "timeout": 0},
        {"id": 1, "op": "exec", "command": "x", "timeout": -1},
        {"id": 1, "op": "exec", "command": "x", "timeout": "5"},
        {"id": 1, "op": "exec", "command": "x", "timeout": 1e300},
        {"id": 1, "op": "exec", "command": "x", "stdin": 3},
        {"id": 1, "op": "exec", "command": "x", "stdin_base64": "***"},
        {"id": 1, "op": "exec", "command": "x", "stdin": "a", "stdin_base64": "YQ=="},
        {"id": 1, "op": "exec", "command": "x", "cwd": 1},
        {"id": 1, "op": "exec", "command": "x", "grants": "a"},
        {"id": 1, "op": "exec", "command": "x", "grant_digest": "00"},
        {"id": 1, "op": "exec", "command": "x", "colour": "red"},
        {"id": 1, "op": "cancel"}, {"id": 1, "op": "cancel", "target": 1.5},
        {"id": 1, "op": "probe", "argv": ["x"]},
    ]
    raw = [b"{", b"}", b"[]", b"[1]", b"null", b"1", b'"s"', b"true", b" ",
           b'{"id":1,"op":"probe"', b'{"id":99999999999999999999999,"op":"probe"}',
           b'{"id":1e999,"op":"probe"}', b'{"id":1,"op":"pro\\u0000be"}',
           b'{"id":1,"op":"probe","id":2}', b'{"id":"\xff\xfe","op":"probe"}',
           b'{"id":1,"op":"probe"}\x00', b'{"id":1,"op":"probe"} {}',
           b"[" * 100000 + b"]" * 100000, b'{"a":' * 5000 + b"1" + b"}" * 5000]
    lines = []
    while len(lines) < 1000:
        k = rng.randrange(4)
        if k == 0:
            lines.append(json.dumps(rng.choice(wrong)).encode())
        elif k == 1:
            lines.append(rng.choice(raw))
        elif k == 2:  # random bytes
            lines.append(bytes(rng.randrange(1, 256) for _ in range(rng.randrange(1, 200)))
                         .replace(b"\n", b"\x01"))
        else:  # a valid request cut short
            t = json.dumps(good).encode()
            lines.append(t[:rng.randrange(1, len(t) - 1)])
    return [ln for ln in lines if ln.strip(b"\x01")]  # none empty


def malformed(ws):
    """Each malformed line is answered with one JSON error, in order; then a line over the
    limit is refused unread, and a probe still works."""
    rng = random.Random(int(os.environ.get("A3S_SERVE_SEED", "15")))
    lines = malformed_lines(rng)
    assert len(lines) >= 1000, len(lines)
    s = Server(ws)
    import threading
    # A writer of its own: the answers must be read while the lines are written.
    def writer():
        for ln in lines:
            s.p.stdin.write(ln + b"\n")
        s.p.stdin.write(b'{"id":"' + b"x" * (1024 * 1024 + 10) + b'","op":"probe"}\n')
        s.p.stdin.write(b'{"id":"after","op":"probe"}\n')
        s.p.stdin.flush()
    w = threading.Thread(target=writer)
    w.start()
    for i, ln in enumerate(lines):
        m = s.read()
        assert m["ok"] is False and set(m["error"]) == {"code", "message"}, (i, ln[:80], m)
        assert m["error"]["code"] in ("bad_json", "bad_request", "unknown_op"), (ln[:80], m)
    m = s.read()
    assert m["ok"] is False and m["error"]["code"] == "too_large" and m["id"] is None, m
    m = s.read()
    assert m == {"id": "after", "ok": True, "result": {"backend": m["result"]["backend"]}}, m
    w.join()
    rc, rest = s.close()
    assert rc == 0 and rest == b"", (rc, rest[:200])


def big_output(ws):
    """10 MB of arbitrary bytes, with a second exec's output interleaved: every byte of
    each arrives in its own events, in seq order, on whole lines."""
    sizes = {1: 10 * 1024 * 1024, 2: 2 * 1024 * 1024}
    s = Server(ws)
    for i, size in sizes.items():
        s.send({"id": i, "op": "exec", "timeout": 600,
                "command": "head -c %d /dev/urandom > data%d.bin && cat data%d.bin && echo done >&2"
                           % (size, i, i)})
    events = {1: [], 2: []}
    finals = {}
    while len(finals) < 2:
        m = s.read()  # a torn or mixed line would not parse
        if "ok" in m:
            finals[m["id"]] = result_of(m)
        else:
            assert m["event"] == "output", m
            events[m["id"]].append(m)
    for i, size in sizes.items():
        r, evs = finals[i], events[i]
        assert r["exit_code"] == 0 and r["total_bytes"] == size + 5, r["total_bytes"]
        assert [e["seq"] for e in evs] == list(range(len(evs))), "seq numbers out of order"
        out, err = bytearray(), bytearray()
        for e in evs:
            b = e["data"].encode() if "data" in e else base64.b64decode(e["data_base64"], validate=True)
            assert len(b) <= 65536
            (out if e["stream"] == "stdout" else err).extend(b)
        with open(os.path.join(ws, "data%d.bin" % i), "rb") as fh:
            want = fh.read()
        assert len(want) == size and bytes(out) == want, (i, len(out), len(want))
        assert bytes(err) == b"done\n", err
        assert r["truncated"] is True  # the result's capture is bounded; the events are not
    rc, _ = s.close()
    assert rc == 0


def same_as_json(ws):
    """An exec's result is the object `a3s-sandbox --json` prints for the same command."""
    cmds = [
        {"command": "echo hi; printf 'x\\377y' >&2; exit 3"},
        {"argv": ["sh", "-c", 'echo "$GREETING"; cat', "x"], "env": {"GREETING": "hello"},
         "stdin": "from stdin\n"},
        {"command": "sleep 30", "timeout": 0.5},
        {"command": "kill -TERM $$"},
    ]
    s = Server(ws)
    for i, c in enumerate(cmds):
        s.send(dict(c, id=i, op="exec"))
        got = stable(result_of(s.until_final(i)))
        args = [CLI, "--json", "-w", ws]
        for k, v in c.get("env", {}).items():
            args += ["-e", "%s=%s" % (k, v)]
        if "timeout" in c:
            args += ["-t", str(c["timeout"])]
        args += ["-c", c["command"]] if "command" in c else ["--", *c["argv"]]
        p = subprocess.run(args, input=c.get("stdin", "").encode(), capture_output=True)
        want = stable(json.loads(p.stdout))
        assert got == want, "exec %d:\n#   serve: %s\n#   --json: %s" % (i, got, want)
    rc, _ = s.close()
    assert rc == 0


def requests(ws):
    """The other ops, stdin as bytes, duplicate ids, the cap on running requests, and
    the end of stdin waiting for a running exec."""
    s = Server(ws)
    s.send({"id": 1, "op": "digest"})
    d = result_of(s.read())["digest"]
    want = subprocess.run([CLI, "digest", "-w", ws], capture_output=True, text=True).stdout.strip()
    assert d == want, (d, want)
    s.send({"id": 2, "op": "plan"})
    plan = result_of(s.read())
    want = json.loads(subprocess.run([CLI, "plan", "-w", ws], capture_output=True).stdout)
    # Each evaluation names a scratch directory of its own.
    scratch = lambda v: re.sub(r"a3s-sandbox-[A-Za-z0-9]{12}", "SCRATCH", json.dumps(v))
    assert scratch(plan) == scratch(want) and plan != {}, "plan differs"
    s.send({"id": 3, "op": "capabilities"})
    want = json.loads(subprocess.run([CLI, "capabilities", "-w", ws], capture_output=True).stdout)
    assert result_of(s.read()) == want, "capabilities differ"
    s.send({"id": 4, "op": "digest", "grants": ["example.org:443"], "grant_digest": "0" * 64})
    m = s.read()
    assert m["ok"] is False and m["error"]["code"] == "policy", m
    s.send({"id": "g", "op": "exec", "argv": ["true"], "grants": ["-oProxyCommand.example"]})
    m = s.read()
    assert m["ok"] is False and m["error"]["code"] == "invalid", m
    assert "may not start with '-'" in m["error"]["message"], m
    data = bytes(range(256))
    s.send({"id": 5, "op": "exec", "argv": ["od", "-An", "-tx1", "-v"],
            "stdin_base64": base64.b64encode(data).decode()})
    r = result_of(s.until_final(5))
    assert bytes.fromhex(r["stdout"].replace("\n", "").replace(" ", "")) == data, r["stdout"]
    # 16 running at once; the 17th and a duplicate id are refused at once. (A failure
    # still releases them: the file they wait for is made whatever happens.)
    try:
        busy(s, ws)
    finally:
        open(os.path.join(ws, "go2"), "w").close()
    # End of input with an exec running: it finishes, then the server exits 0.
    s.send({"id": 6, "op": "exec", "command": "sleep 0.5; echo late"})
    rc, rest = s.close()
    lines = [json.loads(x) for x in rest.splitlines()]
    assert rc == 0 and lines[-1]["id"] == 6 and lines[-1]["result"]["stdout"] == "late\n", (rc, lines)


def busy(s, ws):
    for i in range(16):
        s.send({"id": "w%d" % i, "op": "exec", "timeout": 120,
                "command": "while [ ! -e go2 ]; do sleep 0.05; done"})
    s.send({"id": "w0", "op": "probe"})
    s.send({"id": "extra", "op": "probe"})
    m1, m2 = s.read(), s.read()
    assert m1["id"] is None and m1["error"]["code"] == "duplicate_id", m1
    assert m1["error"]["duplicate_of"] == "w0", m1
    assert m2["id"] == "extra" and m2["error"]["code"] == "busy", m2
    open(os.path.join(ws, "go2"), "w").close()
    done = set()
    while len(done) < 16:
        m = s.read()
        assert m["ok"] is True and m["result"]["exit_code"] == 0, m
        done.add(m["id"])
    # A final message read means its slot is free again: one more runs at once.
    s.send({"id": "w0", "op": "exec", "argv": ["true"]})
    assert result_of(s.until_final("w0"))["exit_code"] == 0


def signalled(ws):
    """SIGTERM to the server: the running exec's tree is killed, its final message is
    written (aborted), and the server exits 128 + 15."""
    marker = "31338.%d" % os.getpid()
    s = Server(ws)
    s.send({"id": 1, "op": "exec", "timeout": 120,
                "command": "sleep %s & echo started; wait" % marker})
    events = []
    while not any(e.get("data") == "started\n" for e in events):
        events.append(s.read())
    s.p.send_signal(15)
    f = s.until_final(1)
    assert f["ok"] is False and f["error"]["code"] == "aborted", f
    rc, rest = s.close()
    assert rc == 128 + 15 and rest == b"", (rc, rest)
    left = subprocess.run(["pgrep", "-f", "sleep " + marker], capture_output=True, text=True)
    assert left.stdout == "", "processes left: %s" % left.stdout


def server_killed(ws):
    """The server killed outright (SIGKILL): every running command dies with it."""
    marker = "31340.%d" % os.getpid()
    s = Server(ws)
    for i in range(3):
        s.send({"id": i, "op": "exec", "timeout": 120,
                "command": "sleep %s & echo started; wait" % marker})
    started = 0
    while started < 3:
        started += s.read().get("data") == "started\n"
    s.p.kill()
    s.p.wait(timeout=120)
    # The workers see their cancel pipes hang up, kill their trees, and end.
    for _ in range(600):
        left = subprocess.run(["pgrep", "-f", "sleep " + marker], capture_output=True, text=True)
        if left.stdout == "":
            break
        time.sleep(0.1)
    assert left.stdout == "", "processes left: %s" % left.stdout
    s.p.stdin.close()
    s.p.stdout.close()
    s.p.stderr.close()


def reader_gone(ws):
    """A client that stops reading and goes away: the running commands are killed and
    the server exits 141, without a request or the end of its input."""
    marker = "31339.%d" % os.getpid()
    s = Server(ws)
    s.send({"id": 1, "op": "exec", "timeout": 120,
                "command": "sleep %s & echo started; wait" % marker})
    events = []
    while not any(e.get("data") == "started\n" for e in events):
        events.append(s.read())
    s.p.stdout.close()
    s.send({"id": 2, "op": "probe"})  # its answer finds no reader
    rc = s.p.wait(timeout=120)
    assert rc == 141, rc
    left = subprocess.run(["pgrep", "-f", "sleep " + marker], capture_output=True, text=True)
    assert left.stdout == "", "processes left: %s" % left.stdout
    s.p.stdin.close()
    s.p.stderr.close()


def pgrep(pattern):
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout


def wait_for(cond, seconds):
    end = time.monotonic() + seconds
    while not cond() and time.monotonic() < end:
        time.sleep(0.1)
    return cond()


def stalled_start(ws, marker):
    """A server running `yes MARKER` with a 2 s deadline for a client that reads none of
    its answers."""
    s = Server(ws)
    s.send({"id": 1, "op": "exec", "argv": ["yes", marker], "timeout": 2})
    assert wait_for(lambda: pgrep("yes " + marker), 60), "yes never started"
    return s


def stalled_deadline(ws):
    """A client that stops reading cannot keep a command past its deadline: the tree dies
    at its deadline (a generous bound here), and when the client reads again the events
    lost past the deadline are said by "dropped" events; the result is timed_out."""
    marker = "31341.%d" % os.getpid()
    s = stalled_start(ws, marker)
    try:
        gone = wait_for(lambda: not pgrep("yes " + marker), 20)
        assert gone, "the command outlived its 2 s deadline by 20 s: %s" % pgrep("yes " + marker)
        evs = []
        f = s.until_final(1, evs)
        r = result_of(f)
        assert r["timed_out"] is True, r
        assert [e["seq"] for e in evs] == list(range(len(evs))), "seq numbers out of order"
        kinds = {e["event"] for e in evs}
        assert kinds == {"output", "dropped"}, kinds
        lost = sum(e["bytes"] for e in evs if e["event"] == "dropped")
        got = sum(len(e["data"]) for e in evs if e["event"] == "output")
        assert lost > 0 and got > 0, (lost, got)
        assert got + lost == r["total_bytes"], (got, lost, r["total_bytes"])
        rc, _ = s.close()
        assert rc == 0, rc
    finally:
        subprocess.run(["pkill", "-KILL", "-f", "yes " + marker], capture_output=True)
        s.p.kill()


def stalled_signalled(ws):
    """SIGTERM ends a server whose client reads nothing: the command is killed and the
    server exits 143 within a bound (not blocked writing answers nobody reads)."""
    marker = "31342.%d" % os.getpid()
    s = stalled_start(ws, marker)
    try:
        time.sleep(0.5)  # the answers fill the pipe: the server has no room left
        s.p.send_signal(15)
        try:
            rc = s.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("the server did not exit within 20 s of SIGTERM") from None
        assert rc == 128 + 15, rc
        assert wait_for(lambda: not pgrep("yes " + marker), 20), \
            "processes left: %s" % pgrep("yes " + marker)
    finally:
        subprocess.run(["pkill", "-KILL", "-f", "yes " + marker], capture_output=True)
        s.p.kill()


def running_id(ws):
    """Any line with a running request's id, whatever it asks, is refused as a duplicate
    ("id": null): the running request keeps exactly one final message, its own."""
    s = Server(ws)
    try:
        s.send({"id": 1, "op": "exec", "argv": ["sleep", "1"]})
        lines = [{"id": 1, "op": "exec", "argv": ["true"]}, {"id": 1, "op": "exec"},
                 {"id": 1, "op": "nap"}, {"id": 1, "op": "probe", "bogus": 1},
                 {"id": 1, "op": "cancel", "target": 99}, {"id": 1, "op": "cancel", "target": 1}]
        for ln in lines:
            s.send(ln)
        for ln in lines:
            m = s.read()
            assert m["id"] is None and m["error"]["code"] == "duplicate_id", (ln, m)
            assert m["error"]["duplicate_of"] == 1, m
        f = s.until_final(1)
        assert result_of(f)["exit_code"] == 0, f
        rc, rest = s.close()
        assert rc == 0 and rest == b"", (rc, rest[:200])
    finally:
        s.p.kill()
        s.p.wait()


def deadline_flip(ws):
    """A worker waits for room in the server only until the deadline its exec enforces.
    Attack: the policy's deadline depends on a workspace file that a concurrent command
    creates and removes as fast as it can, so two evaluations of the policy for one exec
    would disagree; fifteen execs write without end (each also ending itself after 3 s)
    while the client reads nothing for 6 s. No exec may report a deadline it did not keep:
    a timed-out exec ends within its limit (plus a generous 4 s), never when the client
    reads again."""
    pol_dir = ws + ".policy"
    os.makedirs(pol_dir, exist_ok=True)
    pol = os.path.join(pol_dir, "flip.lua")
    with open(pol, "w") as f:
        f.write('local plan = a3s.extend("baseline", "flip")\n'
                'plan:limits{ timeout_ms = a3s.host.exists(ctx.workspace .. "/.long")'
                ' and 30000 or 1000 }\n'
                'return plan\n')
    open(os.path.join(ws, ".long"), "w").close()
    s = Server(ws, "--policy", pol)
    try:
        s.send({"id": "A", "op": "exec", "argv": ["python3", "-c",
                "import os, time\n"
                "end = time.monotonic() + 8\n"
                "while time.monotonic() < end:\n"
                "    os.close(os.open('.long', os.O_CREAT | os.O_WRONLY, 0o644)); os.unlink('.long')\n"
                "open('.long', 'w').close()\n"]})
        time.sleep(0.5)
        for i in range(15):
            s.send({"id": "B%d" % i, "op": "exec", "command": "timeout 3 yes"})
            time.sleep(0.03)
        time.sleep(6)  # reading nothing
        finals = {}
        while len(finals) < 16:
            m = s.read()
            if "ok" in m:
                finals[m["id"]] = m
        assert result_of(finals["A"])["exit_code"] == 0, finals["A"]
        bad = []
        for i in range(15):
            r = result_of(finals["B%d" % i])
            limits = [d.get("limit_ms") for d in r.get("denials", []) if d.get("kind") == "deadline"]
            if r["timed_out"] and (not limits or r["duration_ms"] > limits[0] + 4000):
                bad.append(("B%d" % i, r["duration_ms"], limits))
        assert not bad, "execs past the deadline they enforced: %s" % bad
    finally:
        s.p.kill()
        s.p.wait()
        shutil.rmtree(pol_dir, ignore_errors=True)  # beside the workspace: not the spec's tmpdir


if __name__ == "__main__":
    try:
        globals()[sys.argv[1]](sys.argv[2])
    except AssertionError as e:
        for ln in str(e).splitlines() or ["assertion failed"]:
            print("#   " + ln[:2000])
        sys.exit(1)
