// An MCP client built on the official TypeScript SDK, doing what a coding agent does with kf mcp (run.sh).
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const KF = process.env.KF_BIN, WORK = process.env.KF_WORK;
const TASK = path.join(WORK, 'task'), DB = path.join(WORK, 'kernels.sqlite3');
const env = { ...process.env, KERNELFOUNDRY_SERVER_URL: '' };  // local mode, whatever ~/.config says
const transport = new StdioClientTransport({ command: KF, args: ['mcp', '--root', WORK, '--db', DB], env, stderr: 'inherit' });
const client = new Client({ name: 'kf-e2e', version: '1.0.0' });
await client.connect(transport);
console.log('connected:', client.getServerVersion()?.name, 'protocol', transport.protocolVersion ?? '(sdk default)');

const { tools } = await client.listTools();
const names = tools.map(t => t.name);
console.log('tools:', names.join(', '));
for (const t of ['build_and_test', 'evaluate_candidate', 'get_result', 'list_results', 'validate_task']) assert.ok(names.includes(t), t);

const long = { timeout: 300000, resetTimeoutOnProgress: true };
async function buildAndTest(label) {
  const progress = [];
  const t0 = Date.now();
  const r = await client.callTool({ name: 'build_and_test', arguments: { folder_path: TASK } }, undefined,
                                  { ...long, onprogress: p => progress.push(p) });
  assert.equal(r.isError, false, JSON.stringify(r.content));
  const s = r.structuredContent;
  console.log(`${label}: ${s.status} speedup ${s.speedup} CI ${JSON.stringify(s.speedup_ci)} uuid ${s.kernel_uuid} ` +
              `parent ${s.parent_uuid} (${((Date.now() - t0) / 1000).toFixed(1)} s, ${progress.length} progress notes)`);
  assert.equal(s.success, true);
  assert.ok(['correct', 'noisy'].includes(s.status), s.status);
  assert.equal(typeof s.speedup, 'number');
  assert.ok(Array.isArray(s.speedup_ci) && s.speedup_ci[0] <= s.speedup && s.speedup <= s.speedup_ci[1], JSON.stringify(s.speedup_ci));
  assert.ok(s.eval_log.length > 0 && typeof s.runtime_stats === 'object' && s.job_id > 0);
  assert.ok(progress.length > 0, 'progress notifications');
  return s;
}

const first = await buildAndTest('first');
assert.equal(first.parent_uuid, null);
// The agent changes the candidate; the second evaluation records the first as its parent.
const kernel = path.join(TASK, 'kernel.py');
fs.writeFileSync(kernel, fs.readFileSync(kernel, 'utf8').replace(/    total = 0\.0\n    for x in xs:\n        total \+= x \* x\n    return total/,
                                                              '    return sum(x * x for x in xs)'));
const second = await buildAndTest('second');
assert.equal(second.parent_uuid, first.kernel_uuid);
assert.deepEqual(JSON.parse(fs.readFileSync(path.join(TASK, '.kernelfoundry', 'kernels.json'), 'utf8')), [first.kernel_uuid, second.kernel_uuid]);
const got = (await client.callTool({ name: 'get_result', arguments: { uuid: second.kernel_uuid } })).structuredContent;
assert.equal(got.ancestors.at(-1).uuid, first.kernel_uuid);

// A candidate evaluated without writing files (the second's code again: the verdict cache may serve it).
const source = fs.readFileSync(kernel, 'utf8');
const code = source.slice(source.indexOf('# [EVOLVE_START]\n') + '# [EVOLVE_START]\n'.length, source.indexOf('# [EVOLVE_END]'));
const cand = (await client.callTool({ name: 'evaluate_candidate', arguments: { task_path: TASK, code, parent_uuid: second.kernel_uuid } },
                                    undefined, long)).structuredContent;
console.log(`evaluate_candidate: ${cand.status} cached ${cand.cached} parent ${cand.parent_uuid}`);
assert.equal(cand.success, true);
assert.equal(cand.parent_uuid, second.kernel_uuid);
assert.equal(JSON.parse(fs.readFileSync(path.join(TASK, '.kernelfoundry', 'kernels.json'), 'utf8')).length, 2);  // no file written
const valid = (await client.callTool({ name: 'validate_task', arguments: { folder_path: TASK } })).structuredContent;
assert.equal(valid.valid, true, JSON.stringify(valid));
assert.equal(valid.harness, 'pytest');

// Errors come back as tool results with isError, and the server goes on.
const outside = await client.callTool({ name: 'build_and_test', arguments: { folder_path: '/etc' } });
assert.equal(outside.isError, true);
assert.match(outside.content[0].text, /outside the folders kf mcp may read/);

// A long evaluation cancelled by the client: its job ends CANCELED and no kernel is stored for it.
fs.writeFileSync(kernel, fs.readFileSync(kernel, 'utf8').replace('DELAY_S = 0.0', 'DELAY_S = 600.0'));
const abort = new AbortController();
const pending = client.callTool({ name: 'build_and_test', arguments: { folder_path: TASK } }, undefined, {
  ...long, signal: abort.signal,
  onprogress: p => { if (/correctness/.test(p.message ?? '')) abort.abort('test cancels'); },
});
await assert.rejects(pending);
const t0 = Date.now();
let status = '';
while (Date.now() - t0 < 60000) {
  status = execFileSync('/usr/bin/python3', ['-c',
    'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select status from jobs order by id desc limit 1").fetchone()[0])', DB]).toString().trim();
  if (status === 'CANCELED') break;
  await new Promise(r => setTimeout(r, 250));
}
assert.equal(status, 'CANCELED');
const listed = (await client.callTool({ name: 'list_results', arguments: {} })).structuredContent.kernels;
assert.equal(listed.length, 3);
assert.equal(await client.ping().then(() => 'pong'), 'pong');  // still serving
await client.close();

// Server mode: the same tools against a `kf serve --submit` (the reference's HTTP flow with a bearer token).
const DB2 = path.join(WORK, 'server.sqlite3'), TASK2 = path.join(WORK, 'task2');
fs.cpSync(TASK, TASK2, { recursive: true });
fs.rmSync(path.join(TASK2, '.kernelfoundry'), { recursive: true, force: true });
fs.writeFileSync(path.join(TASK2, 'kernel.py'), fs.readFileSync(path.join(TASK2, 'kernel.py'), 'utf8').replace('DELAY_S = 600.0', 'DELAY_S = 0.0'));
const token = execFileSync(KF, ['token', 'add', 'alice', '--db', DB2]).toString().trim();
const server = spawn(KF, ['serve', '--submit', '--db', DB2, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
const url = await new Promise((resolve, reject) => {
  server.stdout.once('data', d => resolve(String(d).split(' ')[2].replace(/\/$/, '')));
  server.once('exit', code => reject(new Error('kf serve exited ' + code)));
});
try {
  const remote = new Client({ name: 'kf-e2e-remote', version: '1.0.0' });
  await remote.connect(new StdioClientTransport({
    command: KF, args: ['mcp', '--root', WORK], stderr: 'inherit',
    env: { ...process.env, KERNELFOUNDRY_SERVER_URL: url, KERNELFOUNDRY_USER: 'alice', KERNELFOUNDRY_TOKEN: token,
           KERNELFOUNDRY_POLL_INTERVAL: '0.5' } }));
  const r1 = (await remote.callTool({ name: 'build_and_test', arguments: { folder_path: TASK2 } }, undefined, long)).structuredContent;
  console.log(`server mode: job ${r1.job_id} ${r1.job_status} ${r1.status} speedup ${r1.speedup} CI ${JSON.stringify(r1.speedup_ci)}`);
  assert.equal(r1.success, true);
  assert.ok(['correct', 'noisy'].includes(r1.status), r1.status);
  assert.ok(Array.isArray(r1.speedup_ci), JSON.stringify(r1));
  const r2 = (await remote.callTool({ name: 'build_and_test', arguments: { folder_path: TASK2 } }, undefined, long)).structuredContent;
  assert.equal(r2.parent_uuid, r1.kernel_uuid);
  assert.equal(r2.success, true);
  await remote.close();
} finally {
  server.kill('SIGTERM');
}
console.log('kf mcp e2e: ok');
