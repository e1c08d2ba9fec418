'use strict';
// A client of `a3s-sandbox serve` (docs/PROTOCOL.md), no dependencies.
//
//   const { Client } = require('./bindings/node');
//   const sb = new Client({ workspace: '.' });
//   const r = await sb.exec({ argv: ['make', 'test'], timeout: 300 });
//   await sb.close();
//
// One Client starts one `a3s-sandbox serve`; many requests may be in flight at once.
// exec() resolves to the result object that `a3s-sandbox --json` prints; live output goes
// to onOutput(stream, data) (data: a Buffer; called from the event loop, so it may call
// the client). start() returns an Execution at once (result(), cancel(), and an async
// iterator over its output). Refusals reject with a SandboxError (code and message are
// the protocol's); a cancelled exec with Cancelled.
//
// An Execution holds at most maxBuffer bytes (a Client option, default 8 MiB) of output
// its iterator has not taken: the client never stops reading the server for one slow
// consumer, so the others' answers keep coming. Past that, output is dropped, and the
// iterator yields { stream, dropped: BYTES } where it was lost; the server reports its own
// drops (past a deadline, docs/PROTOCOL.md) the same way, and to onDropped(stream, bytes)
// for exec(). The result object is whole either way.
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

class SandboxError extends Error {
  constructor(code, message) {
    super(`${code}: ${message}`);
    this.name = 'SandboxError';
    this.code = code;
    this.detail = message;
  }
}

class Cancelled extends SandboxError {
  constructor(code, message) {
    super(code, message);
    this.name = 'Cancelled';
  }
}

function errorOf(err) {
  let message = err.message;
  if (message && typeof message === 'object') { // host text that is not UTF-8
    message = Buffer.from(message.base64 || '', 'base64').toString('utf8');
  }
  return err.code === 'cancelled' ? new Cancelled(err.code, message) : new SandboxError(err.code, message);
}

// The program: options.cli, else $A3S_SANDBOX_CLI, else a3s-sandbox on PATH.
function findCli(cli) {
  if (cli) return cli;
  if (process.env.A3S_SANDBOX_CLI) return process.env.A3S_SANDBOX_CLI;
  for (const dir of (process.env.PATH || '').split(path.delimiter)) {
    const f = path.join(dir || '.', 'a3s-sandbox');
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return f;
    } catch (e) { /* not here */ }
  }
  throw new Error('a3s-sandbox not found (give cli or set A3S_SANDBOX_CLI)');
}

const MAX_BUFFER = 8 * 1024 * 1024; // bytes of output an Execution holds (maxBuffer)

class Execution {
  constructor(client, id, maxBuffer) {
    this.id = id;
    this._client = client;
    this._events = [];
    this._buffered = 0; // bytes of data in _events
    this._maxBuffer = maxBuffer;
    this._lost = { stdout: 0, stderr: 0 }; // dropped since the stream's last queued data
    this._wake = null;
    this._ended = false;
    this._result = new Promise((resolve, reject) => {
      this._resolve = resolve;
      this._reject = reject;
    });
    this._result.catch(() => {}); // a rejection nobody awaited is not an error of ours
  }

  _sayLost(stream) {
    if (this._lost[stream]) this._events.push({ stream, dropped: this._lost[stream] });
    this._lost[stream] = 0;
  }

  _output(stream, data) {
    if (this._buffered + data.length > this._maxBuffer) {
      this._lost[stream] += data.length;
      return;
    }
    this._sayLost(stream);
    this._events.push({ stream, data });
    this._buffered += data.length;
    if (this._wake) this._wake();
  }

  _dropped(stream, bytes) {
    this._lost[stream] += bytes;
  }

  _finish() {
    this._sayLost('stdout');
    this._sayLost('stderr');
    this._ended = true;
    if (this._wake) this._wake();
  }

  // The result object; rejects with SandboxError (Cancelled) when the exec failed.
  result() {
    return this._result;
  }

  // Kill the exec's process tree; resolves false when it had already ended.
  async cancel() {
    try {
      await this._client.cancel(this.id);
      return true;
    } catch (e) {
      if (e instanceof SandboxError && e.code === 'not_found') return false;
      throw e;
    }
  }

  // for await (const { stream, data, dropped } of execution) ...: data a Buffer, or
  // dropped the bytes of the stream lost at that place.
  async *[Symbol.asyncIterator]() {
    for (;;) {
      if (this._events.length) {
        const ev = this._events.shift();
        if (ev.data) this._buffered -= ev.data.length;
        yield ev;
      } else if (this._ended) {
        return;
      } else {
        await new Promise((resolve) => { this._wake = resolve; });
        this._wake = null;
      }
    }
  }
}

const MAX_LINE = 1024 * 1024; // bytes of one request line, as the server takes it
const MAX_DEPTH = 1024; // nesting the client sends (the server takes 2048)

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

// The request as one line, or a SandboxError for what the server would refuse without
// naming the request: text that is not UTF-8 (a lone surrogate) or holds a NUL, a number
// that is not finite (JSON has none), a line over MAX_LINE.
function lineOf(req) {
  // Checked as it will be sent: what JSON.stringify made of it (toJSON, dropped members).
  const bad = (v, depth) => {
    if (depth > MAX_DEPTH) return 'nesting too deep';
    if (typeof v === 'string') {
      if (v.includes('\0')) return 'text with a NUL character (give a Buffer as stdin)';
      if (LONE_SURROGATE.test(v)) return 'text that is not UTF-8 (a lone surrogate)';
      return null;
    }
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return 'a number that is not finite';
      return Number.isInteger(v) && Math.abs(v) >= 2 ** 63 ? 'an integer beyond 64 bits' : null;
    }
    if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        const why = bad(k, depth + 1) || bad(x, depth + 1);
        if (why) return why;
      }
    }
    return null;
  };
  let text;
  let why = bad(req, 0); // NaN and Infinity, which JSON.stringify would turn into null
  try {
    text = JSON.stringify(req);
    why = why || bad(JSON.parse(text), 0);
  } catch (e) {
    why = why || `not encodable as JSON: ${e.message}`;
  }
  if (why) throw new SandboxError('bad_request', why);
  const line = text + '\n';
  const n = Buffer.byteLength(line, 'utf8') - 1;
  if (n > MAX_LINE) {
    throw new SandboxError('too_large', `the request is ${n} bytes as JSON; the server takes ` +
      `at most ${MAX_LINE} (stdin is base64 in it: about 786 KiB of bytes)`);
  }
  return line;
}

class Client {
  // options: workspace, policy, cli, args (further options of serve), maxBuffer.
  constructor(options = {}) {
    this._maxBuffer = options.maxBuffer === undefined ? MAX_BUFFER : options.maxBuffer;
    const args = ['serve'];
    if (options.workspace !== undefined) args.push('-w', options.workspace);
    if (options.policy !== undefined) args.push('-p', options.policy);
    args.push(...(options.args || []));
    this._proc = spawn(findCli(options.cli), args, { stdio: ['pipe', 'pipe', 'inherit'] });
    this._pending = new Map();
    this._nextId = 1;
    this._ended = null;
    this._buf = Buffer.alloc(0);
    this._exit = new Promise((resolve) => {
      this._proc.on('close', (code, signal) => {
        this._ended = `the server ended (exit status ${code === null ? signal : code})`;
        for (const p of this._pending.values()) {
          p.fail(new SandboxError('ended', this._ended));
        }
        this._pending.clear();
        resolve(code === null ? signal : code);
      });
    });
    this._proc.on('error', (e) => { this._ended = `the server could not start: ${e.message}`; });
    this._proc.stdin.on('error', () => { /* the server went away: 'close' says it */ });
    this._proc.stdout.on('data', (chunk) => this._data(chunk));
  }

  _data(chunk) {
    this._buf = Buffer.concat([this._buf, chunk]);
    let nl;
    while ((nl = this._buf.indexOf(10)) >= 0) {
      const line = this._buf.subarray(0, nl).toString('utf8');
      this._buf = this._buf.subarray(nl + 1);
      this._message(JSON.parse(line));
    }
  }

  _message(msg) {
    const p = this._pending.get(msg.id);
    if (!p) {
      // A refusal with "id": null names no request. This client never sends a line the
      // server refuses that way (lineOf), so one means the stream is not what it thinks:
      // every pending request fails with it rather than wait forever.
      if (msg.id === null && 'ok' in msg) {
        const e = msg.error || {};
        const pending = [...this._pending.values()];
        this._pending.clear();
        for (const q of pending) {
          q.fail(new SandboxError(e.code || 'internal',
            `the server refused a request without naming it: ${e.message || ''}`));
        }
      }
      return;
    }
    if (msg.event === 'output') {
      const data = 'data' in msg ? Buffer.from(msg.data, 'utf8') : Buffer.from(msg.data_base64, 'base64');
      p.output(msg.stream, data);
      return;
    }
    if (msg.event === 'dropped') {
      p.dropped(msg.stream, msg.bytes);
      return;
    }
    if (!('ok' in msg)) return; // an event of a later protocol
    this._pending.delete(msg.id);
    if (msg.ok) p.done(msg.result);
    else p.fail(errorOf(msg.error || {}));
  }

  _send(req, pending) {
    const line = lineOf(req);
    if (this._ended) throw new SandboxError('ended', this._ended);
    this._pending.set(req.id, pending);
    this._proc.stdin.write(line);
  }

  // Any request of the protocol: resolves to its result.
  request(op, members = {}) {
    return new Promise((resolve, reject) => {
      const id = this._nextId++;
      this._send({ ...members, id, op }, { output() {}, dropped() {}, done: resolve, fail: reject });
    });
  }

  static _execMembers(o) {
    if ((o.argv === undefined) === (o.command === undefined)) {
      throw new TypeError('give exactly one of argv and command');
    }
    const m = o.argv !== undefined ? { argv: [...o.argv] } : { command: o.command };
    if (o.env) m.env = { ...o.env };
    if (typeof o.stdin === 'string') m.stdin = o.stdin;
    else if (o.stdin !== undefined) m.stdin_base64 = Buffer.from(o.stdin).toString('base64');
    if (o.timeout !== undefined) m.timeout = o.timeout;
    if (o.cwd !== undefined) m.cwd = o.cwd;
    if (o.grants) m.grants = [...o.grants];
    if (o.grantDigest !== undefined) m.grant_digest = o.grantDigest;
    return m;
  }

  // Start an exec ({argv} or {command}, env, stdin (string or Buffer), timeout, cwd,
  // grants, grantDigest, onOutput(stream, data), onDropped(stream, bytes)); returns its
  // Execution at once.
  start(options) {
    return this._start(options, true);
  }

  // keep: the Execution keeps the output for its iterator (exec() has no iterator).
  _start(options, keep) {
    const m = Client._execMembers(options);
    const ex = new Execution(this, this._nextId++, this._maxBuffer);
    let thrown = null; // what a callback threw: the exec's promise rejects with it
    const call = (fn, ...args) => {
      if (fn && !thrown) {
        try {
          fn(...args);
        } catch (e) {
          thrown = e;
        }
      }
    };
    this._send({ ...m, id: ex.id, op: 'exec' }, {
      output(stream, data) {
        call(options.onOutput, stream, data);
        if (keep) ex._output(stream, data);
      },
      dropped(stream, bytes) {
        call(options.onDropped, stream, bytes);
        if (keep) ex._dropped(stream, bytes);
      },
      done(result) { ex._finish(); if (thrown) ex._reject(thrown); else ex._resolve(result); },
      fail(e) { ex._finish(); ex._reject(thrown || e); },
    });
    return ex;
  }

  // Run it and resolve to the result object (the options of start()).
  exec(options) {
    try {
      return this._start(options, false).result();
    } catch (e) {
      return Promise.reject(e); // a request it would not send: rejected like a refusal
    }
  }

  cancel(execId) { return this.request('cancel', { target: execId }); }
  probe() { return this.request('probe'); }
  async digest(grants) { return (await this.request('digest', grants ? { grants } : {})).digest; }
  plan() { return this.request('plan'); }
  capabilities() { return this.request('capabilities'); }

  // End the input: running requests finish, then the server exits; resolves to its
  // exit status.
  close() {
    this._proc.stdin.end();
    return this._exit;
  }
}

module.exports = { Client, Execution, SandboxError, Cancelled, MAX_BUFFER };
