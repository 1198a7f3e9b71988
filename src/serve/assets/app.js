// The web page of kf serve: tasks, a task's speedup chart and evaluations table, one evaluation (verdict,
// benchmarks, code with diffs, logs). Reads the JSON API of the same server (include/kernelfoundry/serve.hpp).
// Safety rule: every string from the database is inserted as text (textContent / Text nodes), never as HTML.
'use strict';

const POLL_MS = 3000;
const PAGE = 50;
const FOLD_LINES = 200;  // logs longer than this show their head and tail; the middle unfolds on request
const FOLD_KEEP = 60;
let generation = 0;      // bumped on every navigation; stale polls and fetches stop drawing

// ------------------------------------------------------------------------------------------ helpers

/** Creates an element: props (class, text, on<event>, attributes) and children (nodes or strings as text). */
function el(tag, props, ...children) {
  const e = tag.startsWith('svg:') ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4))
                                   : document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null) continue;
    if (k === 'class') e.setAttribute('class', v);
    else if (k === 'text') e.textContent = String(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

/** GET of the JSON API. Behind kf serve --submit the API needs a bearer token: asked for once (kept for the
 *  browser tab in sessionStorage) when the server answers 401. */
async function api(path) {
  for (let attempt = 0; ; ++attempt) {
    const token = sessionStorage.getItem('kfToken');
    const res = await fetch(path, {cache: 'no-store', headers: token ? {Authorization: 'Bearer ' + token} : {}});
    const body = await res.json();
    if (res.status === 401 && attempt === 0) {
      const t = window.prompt('This kf serve needs an API token (kf token add USER):');
      if (t) { sessionStorage.setItem('kfToken', t.trim()); continue; }
    }
    if (!res.ok) throw new Error(body.error || ('HTTP ' + res.status));
    return body;
  }
}

function fmtSpeedup(v) { return typeof v === 'number' && v > 1e-9 ? v.toPrecision(3) + '×' : '–'; }
function fmtMs(v) { return typeof v === 'number' && v > 0 ? v.toPrecision(4) : '–'; }
function shortTime(t) { return typeof t === 'string' ? t.replace(/\.\d+$/, '') : ''; }
function statusOf(row) { return row.kf_status || row.status || 'unknown'; }
function chip(status, count) {
  return el('span', {class: 'chip st-' + String(status).replace(/[^A-Za-z0-9_-]/g, '_'),
                     'data-status': status}, count === undefined ? status : status + ' ' + count);
}
function isGood(p) { return p.score === 5 && typeof p.speedup === 'number' && p.speedup > 1e-9; }
function hashParams() { return new URLSearchParams(location.hash.replace(/^#/, '')); }
function link(params, text) { return el('a', {href: '#' + new URLSearchParams(params).toString()}, text); }
function setMain(...nodes) { const m = document.getElementById('main'); m.replaceChildren(...nodes); return m; }
function showError(e) { setMain(el('p', {class: 'error'}, 'Error: ' + e.message)); }
function live(text) { document.getElementById('live').textContent = text; }

/** Runs fn now and every POLL_MS until the page changes. */
function poll(fn) {
  const gen = generation;
  const tick = async () => {
    if (gen !== generation) return;
    try { await fn(); live('updated ' + new Date().toLocaleTimeString()); }
    catch (e) { live('update failed: ' + e.message); }
    if (gen === generation) setTimeout(tick, POLL_MS);
  };
  tick();
}

// ------------------------------------------------------------------------------------------ tasks

function renderTasks() {
  const tbody = el('tbody');
  const jobs = el('div', {id: 'running'});
  setMain(el('h1', {}, 'Tasks'),
          el('table', {id: 'tasks-table'},
             el('thead', {}, el('tr', {}, el('th', {}, 'task'), el('th', {class: 'num'}, 'evaluations'),
                                el('th', {class: 'num'}, 'best speedup'), el('th', {}, 'by status'),
                                el('th', {}, 'last evaluation (UTC)'))),
             tbody),
          el('h2', {}, 'Running jobs'), jobs);
  poll(async () => {
    const [t, j] = await Promise.all([api('/api/tasks'), api('/api/jobs?status=RUN&limit=20')]);
    tbody.replaceChildren(...t.tasks.map(s => el('tr', {'data-task': s.task_name},
      el('td', {}, link({task: s.task_name}, s.task_name || '(no name)')),
      el('td', {class: 'num'}, s.kernels),
      el('td', {class: 'num best-speedup'}, fmtSpeedup(s.best_speedup)),
      el('td', {}, ...Object.entries(s.by_kf_status).map(([k, n]) => chip(k || 'unknown', n))),
      el('td', {}, shortTime(s.last_timestamp)))));
    if (!t.tasks.length) tbody.append(el('tr', {}, el('td', {colspan: 5, class: 'muted'}, 'No evaluations stored yet.')));
    jobs.replaceChildren(j.jobs.length
      ? el('ul', {}, ...j.jobs.map(r => el('li', {}, 'job ' + r.id + ' · ' + (r.task_name || r.task_origin) + ' · ' +
                                             Math.round(100 * r.progress) + '% · started ' + shortTime(r.started_at))))
      : el('p', {class: 'muted'}, 'none'));
  });
}

// ------------------------------------------------------------------------------------------ chart

/** Draws the speedup-per-evaluation chart (log y, best-so-far line, failures as crosses at the bottom). */
function drawChart(svg, points) {
  const W = 1000, H = 340, L = 56, R = 16, T = 14, B = 46, FAIL_BAND = 22;
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.replaceChildren();
  const marks = document.createDocumentFragment();  // appended at once: one layout for thousands of points
  const good = points.filter(p => typeof p.speedup === 'number' && p.speedup > 1e-9);
  let lo = Math.min(1, ...good.map(p => p.speedup)), hi = Math.max(1, ...good.map(p => p.speedup));
  lo = Math.log2(lo) - 0.25; hi = Math.log2(hi) + 0.25;
  const plotBottom = H - B - FAIL_BAND;
  const x = i => L + (points.length <= 1 ? (W - L - R) / 2 : i * (W - L - R) / (points.length - 1));
  const y = v => plotBottom - (Math.log2(v) - lo) / (hi - lo) * (plotBottom - T);
  // Grid at powers of two.
  for (let e = Math.ceil(lo); e <= Math.floor(hi); ++e) {
    const v = Math.pow(2, e), yy = y(v);
    svg.append(el('svg:line', {class: e === 0 ? 'one' : 'grid', x1: L, x2: W - R, y1: yy, y2: yy}),
               el('svg:text', {x: L - 6, y: yy + 4, 'text-anchor': 'end'}, (v >= 1 ? v : v.toPrecision(2)) + '×'));
  }
  svg.append(el('svg:line', {class: 'axis', x1: L, x2: L, y1: T, y2: H - B}),
             el('svg:line', {class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B}),
             el('svg:text', {x: L - 6, y: H - B - 6, 'text-anchor': 'end'}, 'failed'),
             el('svg:text', {x: (L + W - R) / 2, y: H - 10, 'text-anchor': 'middle'},
                'evaluation (oldest → newest); y: speedup over the reference, log scale'));
  // Best so far (correct evaluations only), as a step line.
  let best = null, d = '';
  points.forEach((p, i) => {
    if (!isGood(p)) return;
    if (best === null) { best = p.speedup; d = `M${x(i)},${y(best)}`; }
    else if (p.speedup > best) { d += `H${x(i)}V${y(p.speedup)}`; best = p.speedup; }
  });
  if (best !== null) svg.append(el('svg:path', {class: 'best', d: d + `H${x(points.length - 1)}`}));
  // One mark per evaluation.
  const colors = {correct: '#2a9d4b', noisy: '#8ab33a', build_error: '#d23b2d', compile_error: '#d23b2d',
                  value_mismatch: '#e68a00', tests_failed: '#e68a00', crash: '#b8338f', timeout: '#b8338f'};
  points.forEach((p, i) => {
    const st = statusOf(p), color = colors[st] || '#6d5bd0';
    const title = el('svg:title', {}, `#${p.id} · ${st} · ${fmtSpeedup(p.speedup)} · ${shortTime(p.timestamp)}`);
    let mark;
    if (typeof p.speedup === 'number' && p.speedup > 1e-9) {
      mark = el('svg:circle', {class: 'pt', cx: x(i), cy: y(p.speedup), r: 4, fill: color, 'fill-opacity': 0.8,
                               'data-id': p.id, 'data-status': st}, title);
    } else {
      const cx = x(i), cy = H - B - FAIL_BAND / 2, s = 4;
      mark = el('svg:path', {class: 'pt fail', d: `M${cx - s},${cy - s}L${cx + s},${cy + s}M${cx - s},${cy + s}L${cx + s},${cy - s}`,
                             stroke: color, 'stroke-width': 2, 'data-id': p.id, 'data-status': st}, title);
    }
    marks.append(mark);
  });
  svg.append(marks);
}

// ------------------------------------------------------------------------------------------ lineage graph

const STATUS_COLORS = {correct: '#2a9d4b', noisy: '#8ab33a', build_error: '#d23b2d', compile_error: '#d23b2d',
                       value_mismatch: '#e68a00', tests_failed: '#e68a00', crash: '#b8338f', timeout: '#b8338f'};

/** The generation graph of a task (/api/graph): one column per generation (distance from a root through
 *  parent_uuid), parent → child edges, nodes coloured by status and sized by speedup (log scale). */
function drawGraph(svg, g) {
  const byId = new Map(g.nodes.map(n => [n.id, n]));
  const parent = new Map(g.edges.map(e => [e.child, e.parent]));
  const depth = new Map();
  const depthOf = id => {
    if (depth.has(id)) return depth.get(id);
    depth.set(id, 0);  // a cycle ends here
    const p = parent.get(id);
    const d = p !== undefined && byId.has(p) ? depthOf(p) + 1 : 0;
    depth.set(id, d);
    return d;
  };
  const columns = [];
  for (const n of g.nodes) (columns[depthOf(n.id)] ||= []).push(n);
  const rows = Math.max(1, ...columns.map(c => c ? c.length : 0));
  const W = 1000, colW = Math.max(60, Math.min(160, (W - 40) / Math.max(1, columns.length))), rowH = 26;
  const H = Math.max(60, rows * rowH + 30);
  svg.setAttribute('viewBox', `0 0 ${Math.max(W, columns.length * colW + 40)} ${H}`);
  svg.replaceChildren();
  const pos = new Map();
  columns.forEach((c, d) => (c || []).forEach((n, i) => pos.set(n.id, [30 + d * colW, 20 + i * rowH])));
  for (const e of g.edges) {
    const a = pos.get(e.parent), b = pos.get(e.child);
    if (a && b) svg.append(el('svg:line', {class: 'edge', x1: a[0], y1: a[1], x2: b[0], y2: b[1]}));
  }
  for (const n of g.nodes) {
    const [x, y] = pos.get(n.id), st = n.status || n.reference_status || 'unknown';
    const r = typeof n.speedup === 'number' ? Math.max(3, Math.min(11, 6 + 3 * Math.log2(n.speedup))) : 3;
    svg.append(el('svg:circle', {class: 'node', cx: x, cy: y, r, fill: STATUS_COLORS[st] || '#6d5bd0',
                                 'data-id': n.id, 'data-status': st, 'data-parent': parent.get(n.id) ?? ''},
                  el('svg:title', {}, `#${n.id} · ${st} · ${fmtSpeedup(n.speedup)} · generation ${depth.get(n.id)}`)));
  }
}

/** The ancestry of one kernel (/api/lineage): root … parent → this kernel → children, as links. */
async function lineageView(uuid) {
  const box = el('div', {id: 'lineage'});
  if (!uuid) return box;
  try {
    const l = await api('/api/lineage?' + new URLSearchParams({uuid}));
    const item = (n, note) => el('li', {'data-id': n.id}, link({kernel: n.id}, '#' + n.id), ' ', chip(n.status || n.reference_status || 'unknown'),
                                 ' ', fmtSpeedup(n.speedup), note ? ' ' + note : '');
    box.append(el('ol', {id: 'ancestry'}, ...l.ancestors.map(a => item(a, '')), item(l.kernel, '← this evaluation')));
    if (l.missing_parent) box.prepend(el('p', {class: 'muted'}, `parent ${l.missing_parent} is not in this database`));
    box.append(l.children.length ? el('p', {id: 'children'}, 'children: ', ...l.children.map(c => el('span', {}, link({kernel: c.id}, '#' + c.id), ' ')))
                                 : el('p', {class: 'muted'}, 'no children'));
  } catch (e) { box.append(el('p', {class: 'error'}, 'lineage: ' + e.message)); }
  return box;
}

// ------------------------------------------------------------------------------------------ one task

function renderTask(task) {
  const gen = generation;
  const svg = el('svg:svg', {id: 'chart', width: '100%', role: 'img', onclick: e => {
    const id = e.target.closest('.pt')?.getAttribute('data-id');  // one listener for every point
    if (id) location.hash = 'kernel=' + id;
  }});
  const legend = el('div', {class: 'legend', id: 'legend'});
  const graph = el('svg:svg', {id: 'graph', width: '100%', role: 'img', onclick: e => {
    const id = e.target.closest('.node')?.getAttribute('data-id');
    if (id) location.hash = 'kernel=' + id;
  }});
  const filter = el('select', {id: 'status-filter'}, el('option', {value: ''}, 'all statuses'));
  const tbody = el('tbody');
  const pager = el('span', {id: 'pager'});
  const state = {sort: 'id', order: 'desc', offset: 0, status: ''};
  const points = [];
  const cols = [['id', 'id', 'num'], ['timestamp', 'time (UTC)', ''], [null, 'status', ''], [null, 'ref status', ''],
                ['score', 'score', 'num'], ['runtime', 'runtime ms', 'num'], ['speedup', 'speedup', 'num']];
  const head = el('tr', {}, ...cols.map(([key, label, cls]) => el('th', {
    class: (cls + (key ? ' sortable' : '')).trim(), 'data-sort': key || undefined,
    onclick: key ? () => { state.order = state.sort === key && state.order === 'desc' ? 'asc' : 'desc';
                           state.sort = key; state.offset = 0; loadTable(); } : undefined}, label)));
  filter.addEventListener('change', () => { state.status = filter.value; state.offset = 0; loadTable(); });
  const prev = el('button', {onclick: () => { state.offset = Math.max(0, state.offset - PAGE); loadTable(); }}, '‹ newer');
  const next = el('button', {onclick: () => { state.offset += PAGE; loadTable(); }}, 'older ›');
  setMain(el('p', {}, link({}, '← all tasks')), el('h1', {id: 'task-name'}, task), el('div', {id: 'task-summary'}),
          el('h2', {}, 'Speedup per evaluation'), svg, legend,
          el('h2', {}, 'Generations (parent → child; colour: status, size: speedup)'), graph,
          el('h2', {}, 'Evaluations'),
          el('div', {class: 'controls'}, el('label', {}, 'status ', filter), prev, next, pager),
          el('table', {id: 'kernel-table'}, el('thead', {}, head), tbody));

  async function loadTable() {
    const q = new URLSearchParams({task, sort: state.sort, order: state.order, limit: PAGE, offset: state.offset});
    if (state.status) q.set('status', state.status);
    const page = await api('/api/kernels?' + q.toString());
    if (gen !== generation) return;
    for (const th of head.children) {
      th.classList.remove('sorted-asc', 'sorted-desc');
      if (th.dataset.sort === state.sort) th.classList.add('sorted-' + state.order);
    }
    tbody.replaceChildren(...page.kernels.map(k => el('tr', {'data-id': k.id, 'data-status': statusOf(k)},
      el('td', {class: 'num'}, link({kernel: k.id}, '#' + k.id)), el('td', {}, shortTime(k.timestamp)),
      el('td', {}, chip(statusOf(k))), el('td', {}, k.status || ''), el('td', {class: 'num'}, k.score ?? ''),
      el('td', {class: 'num'}, fmtMs(k.runtime)), el('td', {class: 'num'}, fmtSpeedup(k.improve_over_native)))));
    pager.textContent = page.total ? `${page.offset + 1}–${page.offset + page.kernels.length} of ${page.total}` : 'none';
    prev.disabled = page.offset === 0;
    next.disabled = page.offset + page.kernels.length >= page.total;
  }

  let first = true;
  poll(async () => {
    // New points since the last one, page by page (the server sends at most 2000 per request).
    let added = 0, h;
    do {
      const after = points.length ? points[points.length - 1].id : 0;
      h = await api('/api/history?' + new URLSearchParams({task, after_id: after}));
      if (gen !== generation) return;
      points.push(...h.points);
      added += h.points.length;
    } while (h.more);
    const t = await api('/api/tasks');
    if (gen !== generation) return;
    const summary = t.tasks.find(s => s.task_name === task);
    if (summary) {
      document.getElementById('task-summary').replaceChildren(
        el('span', {}, `${summary.kernels} evaluations · best speedup `),
        el('b', {id: 'best-speedup'}, fmtSpeedup(summary.best_speedup)), ' · ',
        ...Object.entries(summary.by_kf_status).map(([k, n]) => chip(k || 'unknown', n)));
      const known = new Set([...filter.options].map(o => o.value));
      for (const k of Object.keys(summary.by_kf_status)) if (k && !known.has(k)) filter.append(el('option', {value: k}, k));
    }
    if (added || first) {
      drawChart(svg, points);
      const g = await api('/api/graph?' + new URLSearchParams({task}));
      if (gen !== generation) return;
      drawGraph(graph, g);
      const counts = {};
      for (const p of points) counts[statusOf(p)] = (counts[statusOf(p)] || 0) + 1;
      legend.replaceChildren(el('span', {}, `${points.length} evaluations:`),
                             ...Object.entries(counts).map(([k, n]) => chip(k, n)));
      if (!first && state.offset === 0) await loadTable();
    }
    if (first) { first = false; await loadTable(); }
  });
}

// ------------------------------------------------------------------------------------------ diff

/** Line diff (longest common subsequence): [{op: ' '|'+'|'-', line}]. Null when too large to compute. */
function diffLines(a, b) {
  const A = a.split('\n'), B = b.split('\n'), n = A.length, m = B.length;
  if (n * m > 4e6) return null;
  const w = m + 1, dp = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; --i)
    for (let j = m - 1; j >= 0; --j)
      dp[i * w + j] = A[i] === B[j] ? dp[(i + 1) * w + j + 1] + 1 : Math.max(dp[(i + 1) * w + j], dp[i * w + j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (A[i] === B[j]) { out.push({op: ' ', line: A[i]}); ++i; ++j; }
    else if (dp[(i + 1) * w + j] >= dp[i * w + j + 1]) out.push({op: '-', line: A[i++]});
    else out.push({op: '+', line: B[j++]});
  }
  while (i < n) out.push({op: '-', line: A[i++]});
  while (j < m) out.push({op: '+', line: B[j++]});
  return out;
}

/** A <pre> with the diff of `from` → `to`; unchanged runs longer than 2×3 lines are folded. */
function diffView(from, to, id) {
  const d = diffLines(from || '', to || '');
  const pre = el('pre', {class: 'diff', id});
  if (d === null) { pre.append(el('span', {class: 'skip'}, 'too large to diff')); return pre; }
  const added = d.filter(x => x.op === '+').length, removed = d.filter(x => x.op === '-').length;
  pre.append(el('span', {class: 'skip'}, `${added} lines added, ${removed} removed`));
  const CONTEXT = 3;
  for (let k = 0; k < d.length;) {
    if (d[k].op !== ' ') { pre.append(el('span', {class: d[k].op === '+' ? 'add' : 'del'}, d[k].op + ' ' + d[k].line)); ++k; continue; }
    let e = k; while (e < d.length && d[e].op === ' ') ++e;
    const head = k === 0 ? 0 : CONTEXT, tail = e === d.length ? 0 : CONTEXT;
    if (e - k > head + tail + 1) {
      for (let t = k; t < k + head; ++t) pre.append(el('span', {class: 'ctx'}, '  ' + d[t].line));
      pre.append(el('span', {class: 'skip'}, `… ${e - k - head - tail} unchanged lines`));
      for (let t = e - tail; t < e; ++t) pre.append(el('span', {class: 'ctx'}, '  ' + d[t].line));
    } else {
      for (let t = k; t < e; ++t) pre.append(el('span', {class: 'ctx'}, '  ' + d[t].line));
    }
    k = e;
  }
  return pre;
}

// ------------------------------------------------------------------------------------------ logs

/** Appends `text` to `parent` with ANSI SGR colours as classes; other escape sequences are dropped. */
function appendAnsi(parent, text) {
  const re = /\x1b\[([0-9;]*)([A-Za-z])/g;
  let st = {fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, rgb: null};
  let last = 0, m;
  const emit = s => {
    if (!s) return;
    const cls = [];
    if (st.fg !== null) cls.push('ansi-fg-' + st.fg);
    if (st.bg !== null) cls.push('ansi-bg-' + st.bg);
    for (const k of ['bold', 'dim', 'italic', 'underline']) if (st[k]) cls.push('ansi-' + k);
    if (!cls.length && !st.rgb) { parent.append(s); return; }
    const span = el('span', {class: cls.join(' ') || undefined}, s);
    if (st.rgb) span.style.color = st.rgb;
    parent.append(span);
  };
  while ((m = re.exec(text)) !== null) {
    emit(text.slice(last, m.index));
    last = re.lastIndex;
    if (m[2] !== 'm') continue;
    const codes = m[1] === '' ? [0] : m[1].split(';').map(Number);
    for (let i = 0; i < codes.length; ++i) {
      const c = codes[i];
      if (c === 0) st = {fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, rgb: null};
      else if (c === 1) st.bold = true; else if (c === 2) st.dim = true;
      else if (c === 3) st.italic = true; else if (c === 4) st.underline = true;
      else if (c === 22) st.bold = st.dim = false; else if (c === 23) st.italic = false; else if (c === 24) st.underline = false;
      else if (c >= 30 && c <= 37) { st.fg = c - 30; st.rgb = null; }
      else if (c >= 90 && c <= 97) { st.fg = c - 90 + 8; st.rgb = null; }
      else if (c === 39) { st.fg = null; st.rgb = null; }
      else if (c >= 40 && c <= 47) st.bg = c - 40; else if (c === 49) st.bg = null;
      else if (c === 38 && codes[i + 1] === 5) { const n = codes[i + 2] | 0; st.fg = n < 16 ? n : null; i += 2; }
      else if (c === 38 && codes[i + 1] === 2) {
        st.rgb = `rgb(${codes[i + 2] | 0},${codes[i + 3] | 0},${codes[i + 4] | 0})`; st.fg = null; i += 4;
      }
    }
  }
  emit(text.slice(last));
}

/** A log block: ANSI colours rendered; more than FOLD_LINES lines show head and tail with an unfold button. */
function logView(text, cls) {
  const pre = el('pre', {class: 'log ' + (cls || '')});
  const lines = String(text || '').split('\n');
  if (lines.length <= FOLD_LINES) { appendAnsi(pre, lines.join('\n')); return pre; }
  appendAnsi(pre, lines.slice(0, FOLD_KEEP).join('\n') + '\n');
  const hidden = lines.length - 2 * FOLD_KEEP;
  const button = el('button', {class: 'unfold'}, `show ${hidden} more lines`);
  const middle = el('span', {});
  button.addEventListener('click', () => {
    appendAnsi(middle, lines.slice(FOLD_KEEP, lines.length - FOLD_KEEP).join('\n') + '\n');
    button.remove();
  });
  pre.append(button, middle);
  appendAnsi(pre, '\n' + lines.slice(lines.length - FOLD_KEEP).join('\n'));
  return pre;
}

// ------------------------------------------------------------------------------------------ one evaluation

async function renderKernel(id) {
  const gen = generation;
  const k = await api('/api/kernels/' + encodeURIComponent(id));
  if (gen !== generation) return;
  const v = k.verdict;
  const bench = el('tbody', {}, ...k.benchmarks.map(b => el('tr', {},
    el('td', {}, b.arch || ''), el('td', {}, b.name), el('td', {class: 'num'}, fmtMs(b.reference_ms)),
    el('td', {class: 'num'}, fmtMs(b.candidate_ms)), el('td', {class: 'num'}, fmtSpeedup(b.speedup)),
    el('td', {class: 'num'}, b.speedup_ci ? `${fmtSpeedup(b.speedup_ci[0])} – ${fmtSpeedup(b.speedup_ci[1])}`
                                          : (typeof b.std_ms === 'number' ? `±${fmtMs(b.std_ms)} ms (min ${fmtMs(b.min_ms)}, max ${fmtMs(b.max_ms)})` : '–')),
    el('td', {class: 'num'}, b.num_trials ?? ''))));
  const logs = el('div', {id: 'logs'},
    el('details', {open: ''}, el('summary', {}, 'evaluation log'), logView(k.eval_log, 'eval-log')),
    ...k.logs.map(l => el('details', {open: l.returncode !== 0 && l.returncode !== null ? '' : undefined},
      el('summary', {}, `${l.name || l.level} (exit ${l.returncode ?? '?'}, ${String(l.message).split('\n').length} lines)`),
      logView(l.message, 'job-log'))));
  const best = k.best;
  setMain(
    el('p', {}, link({}, '← all tasks'), ' · ', k.task_name ? link({task: k.task_name}, k.task_name) : ''),
    el('h1', {}, `Evaluation #${k.id}`),
    el('div', {class: 'verdict', id: 'verdict'},
       el('div', {class: 'status'}, chip(v.status || v.reference_status || 'unknown'), ' ',
          el('span', {id: 'speedup'}, fmtSpeedup(v.speedup))),
       el('div', {id: 'status-detail'}, v.detail || ''),
       el('div', {class: 'muted'}, `reference status ${v.reference_status ?? '–'} · score ${v.score ?? '–'} · runtime `
          + `${fmtMs(v.runtime_ms)} ms · job ${k.job_id ?? '–'} (${k.job_status ?? '–'}) · ${k.gpu_arch || ''} · `
          + shortTime(k.timestamp))),
    el('h2', {}, 'Lineage'), await lineageView(k.uuid),
    el('h2', {}, 'Benchmarks'),
    k.benchmarks.length ? el('table', {id: 'bench-table'}, el('thead', {}, el('tr', {},
      el('th', {}, 'arch'), el('th', {}, 'benchmark'), el('th', {class: 'num'}, 'reference ms'),
      el('th', {class: 'num'}, 'candidate ms'), el('th', {class: 'num'}, 'speedup'),
      el('th', {class: 'num'}, 'CI / spread'), el('th', {class: 'num'}, 'trials'))), bench)
      : el('p', {class: 'muted'}, 'no timings'),
    el('h2', {}, 'Code'),
    el('details', {open: ''}, el('summary', {}, 'candidate EVOLVE block'), el('pre', {id: 'code'}, k.code.output || '')),
    el('details', {open: ''}, el('summary', {}, "diff against the task's original block"),
       diffView(k.code.input, k.code.output, 'diff-original')),
    best ? el('details', {}, el('summary', {}, `diff against the best earlier candidate #${best.id} (${fmtSpeedup(best.speedup)})`),
              diffView(best.code, k.code.output, 'diff-best'))
         : el('p', {class: 'muted'}, 'no correct earlier candidate of this task to compare with'),
    el('h2', {}, 'Logs'), logs);
}

// ------------------------------------------------------------------------------------------ routing

function route() {
  ++generation;
  live('');
  const p = hashParams();
  try {
    if (p.has('kernel')) renderKernel(p.get('kernel')).catch(showError);
    else if (p.has('task')) renderTask(p.get('task'));
    else renderTasks();
  } catch (e) { showError(e); }
}
window.addEventListener('hashchange', route);
window.addEventListener('DOMContentLoaded', route);
