"""A client of `a3s-sandbox serve` (docs/PROTOCOL.md), standard library only.

    from a3s_sandbox_client import Client
    with Client(workspace=".") as sb:
        r = sb.exec(["make", "test"], timeout=300)
        print(r["exit_code"], r["stdout"])

A Client starts one `a3s-sandbox serve` and may be used from several threads at once:
each call waits for its own answer. exec() returns the result object that
`a3s-sandbox --json` prints; live output goes to on_output(stream, data) (data: bytes,
called in the client's reader thread), or start() returns an Execution to iterate over.
Refusals raise SandboxError (its code and message are the protocol's); a cancelled exec
raises Cancelled.
"""
import base64
import itertools
import json
import os
import queue
import shutil
import subprocess
import threading

__all__ = ["Client", "Execution", "SandboxError", "Cancelled"]


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


class _Pending:
    """A request waiting for its final message; its output goes to on_output(stream,
    data) and/or the events queue (an Execution's), which ends with Execution._END."""

    def __init__(self, on_output=None, events=None):
        self.on_output = on_output
        self.events = events
        self.done = threading.Event()
        self.answer = None
        self.error = None  # what on_output raised: the caller gets it, not the reader

    def output(self, stream, data):
        if self.on_output and self.error is None:
            try:
                self.on_output(stream, data)
            except Exception as e:  # noqa: BLE001 (handed to the caller of exec)
                self.error = e
        if self.events is not None:
            self.events.put((stream, data))

    def finish(self, answer):
        self.answer = answer
        if self.events is not None:
            self.events.put(Execution._END)
        self.done.set()


class Execution:
    """A running exec (Client.start): iterate for its output as (stream, bytes) pairs,
    result() for its result, cancel() to kill it."""

    _END = object()

    def __init__(self, client, rid):
        self._client = client
        self.id = rid
        self._events = queue.Queue()
        self._pending = _Pending(events=self._events)

    def __iter__(self):
        while True:
            item = self._events.get()
            if item is Execution._END:
                self._events.put(item)  # a second iteration ends at once
                return
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
    further options of serve (e.g. ["--audit", "audit.jsonl"])."""

    def __init__(self, workspace=None, policy=None, cli=None, args=()):
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
        self._lock = threading.Lock()  # the request stream and the pending table
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
                continue  # an answer to no request of ours (id null: a refused line)
            if msg.get("event") == "output":
                data = (msg["data"].encode("utf-8") if "data" in msg
                        else base64.b64decode(msg["data_base64"]))
                p.output(msg["stream"], data)
            else:
                p.finish(msg)
        status = self._proc.wait()
        with self._lock:
            self._ended = "the server ended (exit status %s)" % status
            pending, self._pending = self._pending, {}
        for p in pending.values():
            p.finish({"ok": False, "error": {"code": "ended", "message": self._ended}})

    def _send(self, req, pending):
        with self._lock:
            if self._ended:
                raise SandboxError("ended", self._ended)
            self._pending[req["id"]] = pending
            try:
                self._proc.stdin.write(json.dumps(req).encode() + b"\n")
                self._proc.stdin.flush()
            except (BrokenPipeError, ValueError) as e:
                del self._pending[req["id"]]
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
        ex = Execution(self, next(self._ids))
        self._send(dict(m, id=ex.id, op="exec"), ex._pending)
        return ex

    def exec(self, argv=None, command=None, *, env=None, stdin=None, timeout=None, cwd=None,
             grants=None, grant_digest=None, on_output=None):
        """Run argv (a list, as given) or command (a string, with bash) and return the
        result object. stdin: str or bytes; on_output(stream, data) sees every byte (what
        it raises is raised here once the exec has ended)."""
        m = self._exec_members(argv, command, env, stdin, timeout, cwd, grants, grant_digest)
        rid = next(self._ids)
        p = _Pending(on_output)
        self._send(dict(m, id=rid, op="exec"), p)
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
        with self._lock:
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
