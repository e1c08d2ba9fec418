const { Client } = require('a3s-sandbox-client');

(async () => {
  const sb = new Client({ workspace: '.' }); // starts `a3s-sandbox serve`
  const r = await sb.exec({
    argv: ['sh', '-c', 'echo hello; echo oops >&2; exit 3'],
    onOutput: (stream, data) => console.log(stream, JSON.stringify(data.toString())),
  });
  console.log(r.exit_code, JSON.stringify(r.stdout), r.policy);
  await sb.close();
})();
