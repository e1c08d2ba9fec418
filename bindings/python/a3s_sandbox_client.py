"""A client of `a3s-sandbox serve` (docs/PROTOCOL.md), standard library only.

    from a3s_sandbox_client import Client
    with Client(workspace=".") as sb:
        r = sb.exec(["make", "test"], timeout=300)
        print(r["exit_code"], r["stdout"])

A Client starts one `a3s-sandbox serve` and may be used from several threads at once:
each call waits for its own answer. exec() returns the result object that
`a3s-sandbox --json` prints; live output goes to on_output(stream, data), called in the
thread that called exec() (so it may call the client: cancel, probe, even exec), or
start() returns an Execution to iterate over. Refusals raise SandboxError (its code and
message are the protocol's); a cancelled exec raises Cancelled.

Output not yet consumed (by on_output or the Execution's iterator) is held up to
max_buffer bytes per exec (default 8 MiB): the client's reader never waits for a slow
consumer, so one exec's consumer cannot hold up the others' answers. Past that the
output is dropped, and the consumer gets a Dropped (an int: the bytes of the stream lost
at that place) in place of the data; the server reports its own drops (past a deadline,
docs/PROTOCOL.md) the same way. The result object is whole either way.
"""
import base64
import collections
import itertools
import json
import os
import shutil
import subprocess
import threading

__all__ = ["Client", "Execution", "SandboxError", "Cancelled", "Dropped"]

MAX_BUFFER = 8 * 1024 * 1024  # bytes of output held per exec (Client(max_buffer=))
MAX_LINE = 1024 * 1024  # bytes of one request line, as the server takes it


class SandboxError(Exception):
    """A request that failed: code is the protocol's error code ("policy", "busy", ...)."""

    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class Cancelled(SandboxError):
    """The exec was cancelled: its process tree was killed."""


def _error(err):
    message = err.get("message")
    if isinstance(message, dict):  # host text that is not UTF-8: {"base64": ...}
        message = base64.b64decode(message.get("base64", "")).decode("utf-8", "replace")
    cls = Cancelled if err.get("code") == "cancelled" else SandboxError
    return cls(err.get("code"), message)


class Dropped(int):
    """In place of data: this many bytes of the stream were not delivered here (the
    consumer fell more than max_buffer behind, or the server dropped them past the exec's
    deadline)."""

    def __repr__(self):
        return "Dropped(%d)" % self


class _Pending:
    """A request waiting for its final message. With a consumer (queued: on_output or an
    Execution's iterator), its output is queued for it, bounded by max_buffer bytes; the
    queue ends with _END."""

    def __init__(self, queued=False, max_buffer=MAX_BUFFER):
        self.queued = queued
        self.max_buffer = max_buffer
        self.cond = threading.Condition()
        self.items = collections.deque()
        self.buffered = 0  # bytes of data in items
        self.lost = {}  # stream -> bytes dropped since its last queued data
        self.done = threading.Event()
        self.answer = None
        self.error = None  # what on_output raised: the caller of exec gets it

    def _say_lost(self, stream):
        n = self.lost.pop(stream, 0)
        if n:
            self.items.append((stream, Dropped(n)))

    # The reader thread's side: never waits.
    def output(self, stream, data):
        if not self.queued:
            return
        with self.cond:
            if self.buffered + len(data) > self.max_buffer:
                self.lost[stream] = self.lost.get(stream, 0) + len(data)
                return
            self._say_lost(stream)
            self.items.append((stream, data))
            self.buffered += len(data)
            self.cond.notify_all()

    def dropped(self, stream, n):
        if self.queued:
            with self.cond:
                self.lost[stream] = self.lost.get(stream, 0) + n

    def finish(self, answer):
        with self.cond:
            self.answer = answer
            if self.queued:
                for stream in list(self.lost):
                    self._say_lost(stream)
                self.items.append(_END)
            self.done.set()
            self.cond.notify_all()

    # The consumer's side.
    def next_item(self, timeout=None):
        """The next (stream, data) pair, or _END (left in place: it ends every later
        call); None when timeout passed."""
        with self.cond:
            if not self.cond.wait_for(lambda: self.items, timeout):
                return None
            item = self.items[0]
            if item is _END:
                return item
            self.items.popleft()
            if not isinstance(item[1], Dropped):
                self.buffered -= len(item[1])
            return item


_END = object()


class Execution:
    """A running exec (Client.start): iterate for its output as (stream, data) pairs,
    result() for its result, cancel() to kill it."""

    def __init__(self, client, rid, max_buffer):
        self._client = client
        self.id = rid
        self._pending = _Pending(queued=True, max_buffer=max_buffer)

    def __iter__(self):
        """(stream, data) pairs: data is bytes, or a Dropped where output was lost."""
        while True:
            item = self._pending.next_item()
            if item is _END:
                return  # a second iteration ends at once
            yield item

    def result(self, timeout=None):
        """The result object; raises SandboxError (Cancelled) when the exec failed."""
        if not self._pending.done.wait(timeout):
            raise TimeoutError("exec %r has not ended" % (self.id,))
        return self._client._outcome(self._pending.answer)

    def cancel(self):
        """Kill the exec's process tree (its result() then raises Cancelled). Returns False
        when it had already ended."""
        try:
            self._client.cancel(self.id)
            return True
        except SandboxError as e:
            if e.code == "not_found":
                return False
            raise


class Client:
    """One `a3s-sandbox serve` for a workspace and policy.

    cli: the program (default: $A3S_SANDBOX_CLI, else `a3s-sandbox` on PATH); args:
    further options of serve (e.g. ["--audit", "audit.jsonl"]); max_buffer: bytes of
    output held for each exec's consumer (see Dropped)."""

    def __init__(self, workspace=None, policy=None, cli=None, args=(), max_buffer=MAX_BUFFER):
        self._max_buffer = max_buffer
        cli = cli or os.environ.get("A3S_SANDBOX_CLI") or shutil.which("a3s-sandbox")
        if not cli:
            raise FileNotFoundError("a3s-sandbox not found (give cli= or set A3S_SANDBOX_CLI)")
        cmd = [cli, "serve"]
        if workspace is not None:
            cmd += ["-w", os.fspath(workspace)]
        if policy is not None:
            cmd += ["-p", os.fspath(policy)]
        cmd += list(args)
        self._proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._lock = threading.Lock()  # the pending table (the reader takes it per answer)
        # Whole request lines, one writer at a time. Never held with _lock: a write that
        # waits for the server (which stops reading requests while its answers wait for
        # us) must not stop the reader that drains them.
        self._wlock = threading.Lock()
        self._pending = {}
        self._ids = itertools.count(1)
        self._ended = None  # why no more answers come
        self._reader = threading.Thread(target=self._read, name="a3s-sandbox-client", daemon=True)
        self._reader.start()

    # --- the stream ----------------------------------------------------------------------

    def _read(self):
        for line in self._proc.stdout:
            msg = json.loads(line)
            rid = msg.get("id")
            with self._lock:
                p = self._pending.get(rid)
                if p is not None and "ok" in msg:
                    del self._pending[rid]
            if p is None:
                if rid is None and "ok" in msg:
                    self._refused_unnamed(msg)
                continue
            if msg.get("event") == "output":
                data = (msg["data"].encode("utf-8") if "data" in msg
                        else base64.b64decode(msg["data_base64"]))
                p.output(msg["stream"], data)
            elif msg.get("event") == "dropped":
                p.dropped(msg["stream"], msg["bytes"])
            elif "ok" in msg:
                p.finish(msg)
        status = self._proc.wait()
        with self._lock:
            self._ended = "the server ended (exit status %s)" % status
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.finish({"ok": False, "error": {"code": "ended", "message": self._ended}})

    def _refused_unnamed(self, msg):
        """A refusal with "id": null names no request: this client never sends a line the
        server refuses that way (_line), so one means the stream is not what it thinks.
        Every pending request fails with it rather than wait forever."""
        err = msg.get("error") or {}
        with self._lock:
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.finish({"ok": False, "error": {
                "code": err.get("code", "internal"),
                "message": "the server refused a request without naming it: %s"
                           % err.get("message", "")}})

    @staticmethod
    def _line(req):
        """The request as one line, or SandboxError for what the server would refuse
        without naming the request: text that is not UTF-8 (a lone surrogate, as
        os.listdir gives for a name that is not) or holds a NUL, a number that is not
        finite or an integer beyond 64 bits, a key that is not a string (two could become
        one), a line over MAX_LINE."""
        def bad(v):
            if isinstance(v, str):
                return "text with a NUL character (give bytes as stdin)" if "\0" in v else None
            if isinstance(v, bool) or v is None or isinstance(v, float):
                return None
            if isinstance(v, int):
                return None if -2**63 <= v < 2**63 else "an integer beyond 64 bits"
            if isinstance(v, dict):
                for k, x in v.items():
                    if not isinstance(k, str):
                        return "a key that is not a string: %r" % (k,)
                    why = bad(k) or bad(x)
                    if why:
                        return why
                return None
            if isinstance(v, (list, tuple)):
                for x in v:
                    why = bad(x)
                    if why:
                        return why
            return None
        try:
            why = bad(req)
        except RecursionError:
            why = "nesting too deep"
        if why:
            raise SandboxError("bad_request", why)
        try:
            line = json.dumps(req, allow_nan=False, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            raise SandboxError("bad_request", "text that is not UTF-8 (give bytes as stdin, "
                               "or name files by valid UTF-8): %s" % e) from None
        except ValueError as e:
            raise SandboxError("bad_request", "a number that is not finite: %s" % e) from None
        if len(line) > MAX_LINE:
            raise SandboxError("too_large", "the request is %d bytes as JSON; the server takes "
                               "at most %d (stdin is base64 in it: about 786 KiB of bytes)"
                               % (len(line), MAX_LINE))
        return line + b"\n"

    def _send(self, req, pending):
        line = self._line(req)
        with self._lock:
            if self._ended:
                raise SandboxError("ended", self._ended)
            self._pending[req["id"]] = pending
        try:
            with self._wlock:
                self._proc.stdin.write(line)
                self._proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError) as e:
            with self._lock:
                self._pending.pop(req["id"], None)
            raise SandboxError("ended", "the server is gone: %s" % e) from None

    def _outcome(self, msg):
        if msg.get("ok"):
            return msg["result"]
        raise _error(msg.get("error", {}))

    def request(self, op, **members):
        """Any request of the protocol; returns its result or raises SandboxError."""
        rid = next(self._ids)
        p = _Pending()
        self._send(dict(members, id=rid, op=op), p)
        p.done.wait()
        return self._outcome(p.answer)

    # --- the ops -------------------------------------------------------------------------

    @staticmethod
    def _exec_members(argv, command, env, stdin, timeout, cwd, grants, grant_digest):
        if (argv is None) == (command is None):
            raise TypeError("give exactly one of argv and command")
        m = {"argv": list(argv)} if argv is not None else {"command": command}
        if env:
            m["env"] = dict(env)
        if isinstance(stdin, str):
            m["stdin"] = stdin
        elif stdin is not None:
            m["stdin_base64"] = base64.b64encode(bytes(stdin)).decode()
        if timeout is not None:
            m["timeout"] = timeout
        if cwd is not None:
            m["cwd"] = cwd
        if grants:
            m["grants"] = list(grants)
        if grant_digest is not None:
            m["grant_digest"] = grant_digest
        return m

    def start(self, argv=None, command=None, *, env=None, stdin=None, timeout=None, cwd=None,
              grants=None, grant_digest=None):
        """Start an exec and return its Execution at once."""
        m = self._exec_members(argv, command, env, stdin, timeout, cwd, grants, grant_digest)
        ex = Execution(self, next(self._ids), self._max_buffer)
        self._send(dict(m, id=ex.id, op="exec"), ex._pending)
        return ex

    def exec(self, argv=None, command=None, *, env=None, stdin=None, timeout=None, cwd=None,
             grants=None, grant_digest=None, on_output=None):
        """Run argv (a list, as given) or command (a string, with bash) and return the
        result object. stdin: str or bytes; on_output(stream, data), called in this
        thread, sees every byte (data: bytes, or a Dropped where output was lost; what it
        raises is raised here once the exec has ended)."""
        m = self._exec_members(argv, command, env, stdin, timeout, cwd, grants, grant_digest)
        rid = next(self._ids)
        p = _Pending(queued=on_output is not None, max_buffer=self._max_buffer)
        self._send(dict(m, id=rid, op="exec"), p)
        if on_output is not None:
            while True:
                item = p.next_item()
                if item is _END:
                    break
                if p.error is None:
                    try:
                        on_output(*item)
                    except Exception as e:  # noqa: BLE001 (raised once the exec ended)
                        p.error = e
        p.done.wait()
        if p.error is not None:
            raise p.error
        return self._outcome(p.answer)

    def cancel(self, exec_id):
        return self.request("cancel", target=exec_id)

    def probe(self):
        return self.request("probe")

    def digest(self, grants=None):
        return self.request("digest", **({"grants": list(grants)} if grants else {}))["digest"]

    def plan(self):
        return self.request("plan")

    def capabilities(self):
        return self.request("capabilities")

    # --- the end -------------------------------------------------------------------------

    def close(self):
        """End the input; running requests finish, then the server exits. Returns its
        exit status."""
        with self._wlock:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        self._reader.join()
        self._proc.stdout.close()
        return self._proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
