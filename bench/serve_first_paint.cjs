// First paint of kf serve's pages in headless chromium (run by serve_bench when KF_PLAYWRIGHT names the
// playwright-core package, e.g. build/serve-e2e/node/node_modules/playwright-core after the browser test):
//   node serve_first_paint.cjs URL TASK
// Prints ms from navigation to: the tasks table filled; a task's chart drawn (all points) and its table filled;
// one evaluation page shown. Median of 3 loads each (a fresh page per load).
'use strict';
const {chromium} = require(process.env.KF_PLAYWRIGHT);
const [url, task] = process.argv.slice(2);

async function time(browser, hash, ready, arg) {
  const v = [];
  for (let i = 0; i < 3; ++i) {
    const page = await browser.newPage({viewport: {width: 1280, height: 900}});
    const t0 = Date.now();
    await page.goto(url + hash);
    await page.waitForFunction(ready, arg, {timeout: 60000});
    v.push(Date.now() - t0);
    await page.close();
  }
  v.sort((a, b) => a - b);
  return v[1];
}

(async () => {
  const browser = await chromium.launch({executablePath: process.env.KF_CHROMIUM || '/usr/bin/chromium',
                                         headless: true, args: ['--no-sandbox', '--disable-gpu']});
  const n = (await (await fetch(url + 'api/kernels?limit=1&task=' + encodeURIComponent(task))).json()).total;
  const tasks = await time(browser, '', () => document.querySelectorAll('#tasks-table tr[data-task]').length > 0);
  const chart = await time(browser, '#task=' + encodeURIComponent(task),
                           n => document.querySelectorAll('#chart .pt').length === n &&
                                document.querySelectorAll('#kernel-table tbody tr').length > 0, n);
  const kernel = await time(browser, '#kernel=1', () => document.querySelector('#verdict') !== null);
  console.log(`first paint (median of 3): tasks ${tasks} ms; task page with ${n} chart points ${chart} ms; ` +
              `evaluation page ${kernel} ms`);
  await browser.close();
})().catch(e => { console.error(e); process.exit(1); });
