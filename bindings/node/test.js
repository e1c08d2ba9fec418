'use strict';
// Tests of the Node client against the real `a3s-sandbox serve` (node:test; the CLI from
// $A3S_CLI or $A3S_SANDBOX_CLI). Exit 77 (skipped) where no sandbox can run.
const test = require('node:test');
const assert = require('node:assert/strict');
const { spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Client, Cancelled, SandboxError, MAX_BUFFER } = require('./index.js');

const CLI = process.env.A3S_CLI || process.env.A3S_SANDBOX_CLI || 'a3s-sandbox';
const README = path.join(__dirname, '..', '..', 'README.md');

function tmpdir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'a3s-node-'));
}

const probeWs = tmpdir();
const probe = spawnSync(CLI, ['probe', '-w', probeWs], { encoding: 'utf8' });
fs.rmSync(probeWs, { recursive: true, force: true });
if (probe.status !== 0) {
  console.log(`SKIP: the sandbox boundary is unavailable here: ${probe.stderr}`);
  process.exit(process.env.A3S_MUST_WORK === '1' ? 1 : 77);
}

// A fresh workspace and client for each test; closed with exit status 0.
function withClient(fn) {
  return async () => {
    const ws = tmpdir();
    const sb = new Client({ workspace: ws, cli: CLI });
    try {
      await fn(sb, ws);
    } finally {
      assert.equal(await sb.close(), 0);
      fs.rmSync(ws, { recursive: true, force: true });
    }
  };
}

test('the README example is example.js, and it runs', () => {
  const example = fs.readFileSync(path.join(__dirname, 'example.js'), 'utf8');
  assert.ok(fs.readFileSync(README, 'utf8').includes('```js\n' + example + '```\n'),
    'README.md holds example.js verbatim');
  // require('a3s-sandbox-client') as after `npm install bindings/node`.
  const mods = tmpdir();
  fs.symlinkSync(__dirname, path.join(mods, 'a3s-sandbox-client'));
  const ws = tmpdir();
  const r = spawnSync(process.execPath, [path.join(__dirname, 'example.js')], {
    cwd: ws, encoding: 'utf8', timeout: 120000,
    env: { ...process.env, NODE_PATH: mods, A3S_SANDBOX_CLI: CLI },
  });
  fs.rmSync(mods, { recursive: true, force: true });
  fs.rmSync(ws, { recursive: true, force: true });
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trimEnd().split('\n');
  assert.deepEqual(lines.slice(0, 2).sort(), ['stderr "oops\\n"', 'stdout "hello\\n"']);
  assert.deepEqual(lines.slice(2), ['3 "hello\\n" baseline']);
});

test('exec resolves to the --json result', withClient(async (sb) => {
  const r = await sb.exec({ command: 'echo hi; exit 4', env: { X: '1' } });
  assert.equal(r.exit_code, 4);
  assert.equal(r.stdout, 'hi\n');
  assert.equal(r.timed_out, false);
  assert.equal(r.policy_digest.length, 64);
}));

test('bytes in and out are lossless', withClient(async (sb) => {
  const data = Buffer.alloc(256 * 64, 0).map((_, i) => i % 256);
  const seen = [];
  const r = await sb.exec({ argv: ['cat'], stdin: data, onOutput: (s, d) => { if (s === 'stdout') seen.push(d); } });
  assert.equal(r.exit_code, 0);
  assert.ok(Buffer.concat(seen).equals(data));
}));

test('a throwing onOutput rejects the exec, and the client goes on', withClient(async (sb) => {
  await assert.rejects(sb.exec({ argv: ['echo', 'x'], onOutput: () => { throw new Error('from the callback'); } }),
    /from the callback/);
  assert.equal((await sb.exec({ argv: ['echo', 'y'] })).stdout, 'y\n');
}));

test('a callback may call the client (it runs on the event loop, not inside a read)', withClient(async (sb) => {
  const seen = [];
  const ex = sb.start({
    command: 'echo started; sleep 600',
    onOutput: (stream, data) => {
      seen.push(sb.probe().then((r) => r.backend));
      seen.push(ex.cancel());
    },
  });
  await assert.rejects(ex.result(), Cancelled);
  assert.deepEqual(await Promise.all(seen), ['linux-bwrap', true]);
}));

test('unread output is bounded: at most MAX_BUFFER held, the rest said dropped', withClient(async (sb) => {
  const size = 200 * 1000 * 1000;
  const before = process.resourceUsage().maxRSS; // KiB
  const ex = sb.start({ command: `head -c ${size} /dev/zero | tr '\\0' a`, timeout: 600 });
  const r = await ex.result();
  const grown = process.resourceUsage().maxRSS - before;
  assert.equal(r.exit_code, 0);
  assert.equal(r.total_bytes, size);
  assert.ok(grown * 1024 < MAX_BUFFER + 96 * 1024 * 1024, `peak RSS grew by ${grown} KiB`);
  let got = 0;
  let lost = 0;
  for await (const { stream, data, dropped } of ex) {
    assert.equal(stream, 'stdout');
    if (dropped !== undefined) lost += dropped;
    else got += data.length;
  }
  assert.ok(got <= MAX_BUFFER, `${got} bytes held`);
  assert.ok(lost > 0);
  assert.equal(got + lost, size);
}));

test('start: iterate the output, then the result', withClient(async (sb) => {
  const ex = sb.start({ command: 'echo one; echo two >&2' });
  const got = { stdout: '', stderr: '' };
  for await (const { stream, data } of ex) got[stream] += data.toString();
  assert.deepEqual(got, { stdout: 'one\n', stderr: 'two\n' });
  assert.equal((await ex.result()).exit_code, 0);
}));

test('several requests in flight at once', withClient(async (sb) => {
  const rs = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => sb.exec({ argv: ['sh', '-c', 'echo $0', String(i)] })));
  assert.deepEqual(rs.map((r) => r.stdout), ['0\n', '1\n', '2\n', '3\n', '4\n', '5\n']);
}));

test('cancel kills the exec', withClient(async (sb) => {
  const ex = sb.start({ command: 'echo started; sleep 600' });
  for await (const { data } of ex) if (data.toString() === 'started\n') break;
  assert.equal(await ex.cancel(), true);
  await assert.rejects(ex.result(), Cancelled);
  assert.equal(await ex.cancel(), false); // it has ended
}));

test('refusals reject with their code', withClient(async (sb) => {
  await assert.rejects(sb.exec({ argv: ['true'], grants: ['example.org:443'], grantDigest: '0'.repeat(64) }),
    (e) => e instanceof SandboxError && e.code === 'policy');
  await assert.rejects(sb.exec({ argv: ['true'], cwd: '/etc' }),
    (e) => e instanceof SandboxError && e.code === 'invalid');
}));

test('lines the server could not name reject at once', withClient(async (sb) => {
  const cases = [
    [{ argv: ['wc', '-c'], stdin: Buffer.alloc(800 * 1024, 120) }, 'too_large'],
    [{ argv: ['echo', 'x\udcff'] }, 'bad_request'],
    [{ argv: ['echo', 'a\u0000b'] }, 'bad_request'],
    [{ argv: ['true'], timeout: Infinity }, 'bad_request'],
    [{ argv: ['true'], timeout: NaN }, 'bad_request'],
    [{ argv: ['true'], cwd: { toJSON() { return '\ud800'; } } }, 'bad_request'],
    [{ argv: ['true'], env: { A: JSON.parse('['.repeat(3000) + ']'.repeat(3000)) } }, 'bad_request'],
  ];
  for (const [o, code] of cases) {
    let got = null;
    try {
      await sb.exec(o);
    } catch (e) {
      got = e.code;
    }
    assert.equal(got, code);
  }
  assert.equal((await sb.exec({ argv: ['echo', 'still'] })).stdout, 'still\n');
}));

test('a refusal without an id fails the pending requests', withClient(async (sb) => {
  const ex = sb.start({ command: 'sleep 3' });
  sb._proc.stdin.write('{not json\n'); // a line the client did not check
  await assert.rejects(ex.result(), (e) => e.code === 'bad_json');
}));

test('probe, digest, plan, capabilities', withClient(async (sb, ws) => {
  assert.equal((await sb.probe()).backend, 'linux-bwrap');
  const want = spawnSync(CLI, ['digest', '-w', ws], { encoding: 'utf8' }).stdout.trim();
  assert.equal(await sb.digest(), want);
  assert.ok('bwrap_argv' in (await sb.plan()));
  assert.equal(typeof (await sb.capabilities()), 'object');
}));
