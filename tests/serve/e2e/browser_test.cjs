// The page of kf serve in headless chromium (driven by run.sh): tasks list, chart point count, status filter,
// sorting, evaluation page (verdict, benchmarks, diffs, ANSI logs, folding), live updates, and the hostile
// candidate (no dialog, no injected element, DOM text equal to the raw string). Screenshots go to $KF_OUT.
'use strict';
const assert = require('node:assert/strict');
const {execFileSync} = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const {chromium} = require(process.env.KF_PLAYWRIGHT);

const URL_BASE = process.env.KF_URL;
const OUT = process.env.KF_OUT;
const demo = JSON.parse(fs.readFileSync(process.env.KF_DEMO, 'utf8'));
const HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>";
let checks = 0;
function ok(cond, what) { assert.ok(cond, what); ++checks; console.log('ok  ' + what); }
function eq(a, b, what) { assert.deepEqual(a, b, what); ++checks; console.log('ok  ' + what); }
async function api(p) {
  const res = await fetch(URL_BASE.replace(/\/$/, '') + p);
  return res.json();
}

async function main() {
  const browser = await chromium.launch({executablePath: process.env.KF_CHROMIUM, headless: true,
                                         args: ['--no-sandbox', '--disable-gpu']});
  const page = await browser.newPage({viewport: {width: 1280, height: 900}});
  // Opens one evaluation's page and waits until it is drawn: only the URL's hash changes, so the previous
  // evaluation's page (with its own #logs, #code, folded log) stays in place until then (a loaded CI machine clicked
  // the old page's log summary, then the new page drew over it with the log closed).
  const openKernel = async id => {
    await page.goto(URL_BASE + '#kernel=' + id);
    await page.waitForFunction(want => document.querySelector('h1')?.textContent === `Evaluation #${want}`, id);
  };
  const dialogs = [], errors = [], foreign = [];
  page.on('dialog', d => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', e => errors.push(String(e)));
  page.on('console', m => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('request', r => { if (!r.url().startsWith(URL_BASE) && !r.url().startsWith('data:')) foreign.push(r.url()); });

  // --- tasks
  await page.goto(URL_BASE);
  await page.waitForSelector('#tasks-table tbody tr[data-task]');
  const tasks = (await api('/api/tasks')).tasks;
  eq(await page.locator('#tasks-table tbody tr[data-task]').count(), tasks.length, 'one row per task (3)');
  const omp = tasks.find(t => t.task_name === 'omp_reduction');
  const best = await page.locator('tr[data-task="omp_reduction"] .best-speedup').textContent();
  eq(best, omp.best_speedup.toPrecision(3) + '×', 'tasks list shows the best speedup');
  const hostileRow = page.locator('#tasks-table tbody tr[data-task] td:first-child a').filter({hasText: 'hostile'});
  eq(await hostileRow.textContent(), demo.hostile_task, 'hostile task name is shown as text');
  await page.screenshot({path: path.join(OUT, 'tasks.png'), fullPage: true});

  // --- one task: chart and table
  await page.click('tr[data-task="omp_reduction"] a');
  await page.waitForSelector('#chart .pt');
  const history = (await api('/api/history?task=omp_reduction')).points;
  await page.waitForFunction(n => document.querySelectorAll('#chart .pt').length === n, history.length);
  eq(await page.locator('#chart .pt').count(), history.length, `chart has one point per evaluation (${history.length})`);
  ok(history.length >= 150, 'the task has at least 150 evaluations');
  const failed = history.filter(p => !(typeof p.speedup === 'number' && p.speedup > 1e-9)).length;
  eq(await page.locator('#chart .pt.fail').count(), failed, `failures are marked (${failed})`);
  ok(await page.locator('#chart path.best').count() === 1, 'best-so-far line drawn');
  // The table is filled by its own request, which may land after the chart (CI14, 2026-12-05: counted 0 rows).
  await page.waitForFunction(() => document.querySelectorAll('#kernel-table tbody tr').length > 0);
  eq(await page.locator('#kernel-table tbody tr').count(), 50, 'table shows a page of 50');
  await page.screenshot({path: path.join(OUT, 'task.png'), fullPage: true});
  await page.screenshot({path: path.join(OUT, 'task-view.png')});  // the first screen (README: docs/serve.png)

  // Filter by status.
  const nBuild = (await api('/api/kernels?task=omp_reduction&status=build_error')).total;
  await page.selectOption('#status-filter', 'build_error');
  await page.waitForFunction(() => [...document.querySelectorAll('#kernel-table tbody tr')].every(
    r => r.dataset.status === 'build_error'));
  eq(await page.locator('#kernel-table tbody tr').count(), Math.min(50, nBuild), `filter build_error: ${nBuild} rows`);
  ok((await page.locator('#pager').textContent()).endsWith(`of ${nBuild}`), 'pager counts the filtered rows');
  await page.selectOption('#status-filter', '');

  // Sort by speedup (descending first).
  await page.click('th[data-sort="speedup"]');
  const fastest = (await api('/api/kernels?task=omp_reduction&sort=speedup&order=desc&limit=1')).kernels[0];
  await page.waitForFunction(id => document.querySelector('#kernel-table tbody tr')?.dataset.id === String(id), fastest.id);
  ok(true, `sorted by speedup: first row is #${fastest.id}`);

  // Live update: a new evaluation written by another process shows up without a reload.
  execFileSync(process.env.KF_DEMO_DB_TOOL, [process.env.KF_DB, '1']);
  await page.waitForFunction(n => document.querySelectorAll('#chart .pt').length === n, history.length + 1,
                             {timeout: 15000});
  ok(true, 'a new evaluation appears on the chart by polling');

  // --- one evaluation: a correct candidate with logs and diffs
  const correct = (await api('/api/kernels?task=omp_reduction&status=correct&order=desc&limit=1')).kernels[0];
  await openKernel(correct.id);
  const detail = await api('/api/kernels/' + correct.id);
  eq(await page.locator('#speedup').textContent(), detail.verdict.speedup.toPrecision(3) + '×', 'verdict speedup');
  eq(await page.locator('#bench-table tbody tr').count(), detail.benchmarks.length, 'one row per benchmark');
  const added = await page.locator('#diff-original .add').allTextContents();
  ok(added.includes('+ #pragma omp parallel for simd reduction(+ : s) schedule(static)') &&
     await page.locator('#diff-original .ctx').count() > 0, 'diff against the original block: the added pragma');
  ok(await page.locator('#diff-best').count() === 1, 'diff against the best earlier candidate');
  eq(await page.locator('#code').textContent(), detail.code.output, 'candidate code shown verbatim');
  const logText = await page.locator('#logs').textContent();
  ok(logText.includes('Building CXX object kernel.o') && logText.includes('2 passed'), 'build and test logs shown');
  ok(!logText.includes('\x1b'), 'no raw escape characters in the logs');
  eq(await page.locator('#logs .ansi-fg-2').first().textContent(), '2 passed', 'ANSI green rendered as a class');
  await page.screenshot({path: path.join(OUT, 'evaluation.png'), fullPage: true});

  // A failed build with a long log: folded, unfolds on request, red error.
  const folded = (await api('/api/kernels?task=omp_reduction&limit=1&sort=id&order=asc')).kernels[0];
  await openKernel(folded.id);
  await page.waitForSelector('#logs button.unfold', {state: 'attached'});
  await page.click('#logs details:has(button.unfold) > summary');  // a passing step's log starts closed
  ok(!(await page.locator('#logs').textContent()).includes('warning line 150'), 'long log folded');
  await page.click('#logs button.unfold');
  ok((await page.locator('#logs').textContent()).includes('warning line 150'), 'folded lines unfold');
  const buildError = (await api('/api/kernels?task=omp_reduction&status=build_error&limit=1')).kernels[0];
  await openKernel(buildError.id);
  await page.waitForSelector('#logs .ansi-fg-1');
  ok((await page.locator('#logs .ansi-fg-1.ansi-bold').first().textContent()) === 'error:', 'bold red error rendered');
  ok((await page.locator('#status-detail').textContent()).startsWith('demo build_error'), 'status detail shown');

  // --- the hostile candidate: nothing executes, the text is the raw string
  await openKernel(demo.hostile_id);
  await page.waitForSelector('#code');
  await page.waitForTimeout(500);
  eq(await page.locator('#code').textContent(), '// ' + HOSTILE + '\nint x = 1;\n', 'hostile code is plain text');
  ok((await page.locator('#logs .eval-log').textContent()).includes(HOSTILE), 'hostile eval log is plain text');
  ok((await page.locator('#logs .job-log').first().textContent()).includes(HOSTILE), 'hostile job log is plain text');
  eq(await page.locator('img').count(), 0, 'no <img> element was created');
  eq(await page.locator('script').count(), 1, 'only the page script exists');
  await page.screenshot({path: path.join(OUT, 'hostile.png'), fullPage: true});
  await page.goto(URL_BASE + '#' + new URLSearchParams({task: demo.hostile_task}).toString());
  await page.waitForSelector('#chart .pt');
  eq(await page.locator('#task-name').textContent(), demo.hostile_task, 'hostile task name is plain text');
  await page.waitForTimeout(500);
  eq(dialogs, [], 'no dialog opened');
  eq(errors, [], 'no script errors or CSP violations');
  eq(foreign, [], 'no request left the server (works offline)');

  // --- first paint over the whole demo database
  const t0 = Date.now();
  await page.goto(URL_BASE + '#task=omp_reduction');
  await page.waitForSelector('#chart .pt');
  console.log(`first paint of the task page: ${Date.now() - t0} ms (${history.length + 1} points)`);
  await browser.close();
  console.log(`browser test: ${checks} checks passed`);
}

main().catch(e => { console.error(e); process.exit(1); });
