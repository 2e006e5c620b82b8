// dpfl dashboard (docs/dashboard.md). Plain JavaScript, no build step: it
// reads the public JSON API of the server that serves it (/v1/...) with
// the API token typed into the login form, kept in this tab's
// sessionStorage and sent as "Authorization: Bearer". Everything from
// the server is inserted as text (textContent), never as HTML. Charts are
// uPlot's (vendor/uplot, MIT).
'use strict';

(function () {
  const TOKEN_KEY = 'dpfl.token';
  const BUDGETS_KEY = 'dpfl.budgets';
  const POLL_MS = 3000;
  const LIVE = new Set(['pending', 'running']);

  // The API's prefix: the page is at <prefix>/ui/, the API at <prefix>/v1.
  const base = (function () {
    const p = location.pathname;
    const i = p.lastIndexOf('/ui/');
    return i >= 0 ? p.slice(0, i) : '';
  })();

  const $ = (sel) => document.querySelector(sel);

  // el builds an element: attrs sets properties ("class", "text",
  // "data-*" and "title" specially), children are nodes or strings
  // (strings become text nodes).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-') || k === 'title' || k === 'colspan') e.setAttribute(k, String(v));
      else e[k] = v;
    }
    for (const c of children) {
      if (c !== undefined && c !== null) e.append(c);
    }
    return e;
  }

  // ---- formatting -------------------------------------------------------

  function num(x, digits) {
    if (x === undefined || x === null || !isFinite(x)) return '—';
    return String(Number(Number(x).toPrecision(digits || 4)));
  }
  function eps(x) {
    if (x === undefined || x === null) return '—';
    return Number(x).toFixed(3);
  }
  function pct(x) {
    if (x === undefined || x === null) return '—';
    return (100 * x).toFixed(1) + '%';
  }
  function small(x) {
    if (x === undefined || x === null) return '—';
    return x !== 0 && Math.abs(x) < 1e-3 ? Number(x).toExponential().replace('e-', 'e−') : String(x);
  }
  const pad = (n) => String(n).padStart(2, '0');
  // when is a time in the browser's zone, "2026-11-26 21:23:05".
  function when(s) {
    if (!s) return '—';
    const d = new Date(s);
    if (isNaN(d)) return String(s);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function utc(s) {
    const d = new Date(s);
    return isNaN(d) ? String(s) : d.toISOString().replace('T', ' ').slice(0, 19);
  }
  const terminal = (state) => !LIVE.has(state);

  // describeEvent summarises a DpEvent (accounting.MarshalEvent's JSON).
  function describeEvent(e) {
    if (!e || typeof e !== 'object') return String(e);
    switch (e.type) {
      case 'GaussianDpEvent': return 'Gaussian(z=' + num(e.noise_multiplier) + ')';
      case 'PoissonSampledDpEvent': return 'Poisson(q=' + num(e.sampling_probability) + ') ∘ ' + describeEvent(e.event);
      case 'SampledWithoutReplacementDpEvent':
        return 'Sample(' + e.sample_size + ' of ' + e.source_dataset_size + ') ∘ ' + describeEvent(e.event);
      case 'SelfComposedDpEvent': return e.count + ' × ' + describeEvent(e.event);
      case 'ComposedDpEvent': return '[' + (e.events || []).map(describeEvent).join(', ') + ']';
      case 'NoOpDpEvent': return 'NoOp';
      case 'NonPrivateDpEvent': return 'NonPrivate';
      default: return e.type || JSON.stringify(e);
    }
  }

  // ---- API --------------------------------------------------------------

  class AuthError extends Error {}

  async function errorText(res) {
    try {
      const b = await res.json();
      return (b && b.error) || res.statusText;
    } catch (_) {
      return res.statusText;
    }
  }

  function request(path, token) {
    return fetch(base + path, {
      headers: { 'Authorization': 'Bearer ' + token, 'Accept': 'application/json' },
      cache: 'no-store',
      credentials: 'omit',
      redirect: 'error',
    });
  }

  // api GETs path with the session's token: the decoded JSON, an
  // AuthError on 401 (or without a token), an Error with .status
  // otherwise.
  async function api(path) {
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) throw new AuthError('not signed in');
    let res;
    try {
      res = await request(path, token);
    } catch (e) {
      throw new Error('the server cannot be reached (' + e.message + ')');
    }
    if (res.status === 401) throw new AuthError(await errorText(res));
    if (!res.ok) {
      const err = new Error(res.status + ' ' + (await errorText(res)) + ' (' + path + ')');
      err.status = res.status;
      throw err;
    }
    return res.json();
  }
  const enc = encodeURIComponent;

  // ---- sign in / out ----------------------------------------------------

  function showLoginError(msg) {
    const p = $('#login-error');
    p.textContent = msg || '';
    p.hidden = !msg;
  }

  async function login(ev) {
    ev.preventDefault();
    const input = $('#token');
    const token = input.value.trim();
    if (!token) return;
    showLoginError('');
    $('#login-submit').disabled = true;
    try {
      const res = await request('/v1/jobs', token);
      if (res.status === 401) {
        showLoginError('The server refused this token (401 Unauthorized). Check it and try again.');
        input.select();
        return;
      }
      if (!res.ok) {
        showLoginError('Sign-in failed: ' + res.status + ' ' + (await errorText(res)));
        return;
      }
      sessionStorage.setItem(TOKEN_KEY, token);
      input.value = '';
      enterApp();
    } catch (e) {
      showLoginError('The server cannot be reached: ' + e.message);
    } finally {
      $('#login-submit').disabled = false;
    }
  }

  function signOut(msg) {
    sessionStorage.removeItem(TOKEN_KEY);
    clearTimeout(timer);
    timer = null;
    for (const k of Object.keys(charts)) dropChart(k);
    $('#jobs tbody').replaceChildren();
    latest.clear();
    $('#budgets tbody').replaceChildren();
    $('#ledger tbody').replaceChildren();
    delete $('#ledger tbody').dataset.job;
    $('#app').hidden = true;
    $('#session').hidden = true;
    $('#login').hidden = false;
    document.body.dataset.view = 'login';
    showLoginError(msg || '');
    $('#token').focus();
  }

  function enterApp() {
    $('#login').hidden = true;
    $('#app').hidden = false;
    $('#session').hidden = false;
    document.body.dataset.view = 'app';
    route();
  }

  // ---- refresh loop -----------------------------------------------------

  let timer = null;
  let inflight = null;
  let live = false; // some job is pending or running
  let selected = null; // the job shown below the lists
  let jobs = [];

  function schedule() {
    clearTimeout(timer);
    timer = null;
    if (live && $('#auto').checked && sessionStorage.getItem(TOKEN_KEY)) {
      timer = setTimeout(refresh, POLL_MS);
    }
  }

  // refresh reloads the lists and the selected job, one load at a time:
  // a refresh asked for during a load runs after it.
  let again = false;
  let refreshSeq = 0; // numbers the refreshes; each rendered row carries the one that drew it
  function refresh() {
    if (!sessionStorage.getItem(TOKEN_KEY)) return Promise.resolve();
    if (inflight) {
      again = true;
      return inflight;
    }
    inflight = (async () => {
      try {
        if (document.hidden && live) return; // resumed on visibilitychange
        refreshSeq++;
        await loadOverview();
        if (selected) await loadJob(selected);
        showAppError('');
        $('#updated').textContent = 'updated ' + new Date().toLocaleTimeString() +
          (live && $('#auto').checked ? ' · refreshing every ' + POLL_MS / 1000 + ' s' : '');
        document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
      } catch (e) {
        if (e instanceof AuthError) {
          again = false;
          signOut('Signed out: the server refused the token (401 Unauthorized: ' + e.message + ').');
          return;
        }
        showAppError(e.message);
      } finally {
        inflight = null;
        if (again) {
          again = false;
          refresh();
        } else {
          schedule();
        }
      }
    })();
    return inflight;
  }

  function showAppError(msg) {
    const p = $('#app-error');
    p.textContent = msg || '';
    p.hidden = !msg;
  }

  function route() {
    const m = location.hash.match(/^#job\/(.+)$/);
    selected = m ? decodeURIComponent(m[1]) : null;
    $('#job').hidden = !selected;
    if (!selected) {
      for (const k of Object.keys(charts)) dropChart(k);
      document.body.dataset.job = '';
    }
    highlight();
    refresh();
  }

  // ---- jobs and budgets -------------------------------------------------

  async function loadOverview() {
    const r = await api('/v1/jobs');
    jobs = (r.jobs || []).slice().sort((a, b) =>
      (b.created_at || '').localeCompare(a.created_at || '') || b.id.localeCompare(a.id));
    live = jobs.some((j) => LIVE.has(j.state));
    await loadLatest();
    renderJobs();
    await loadBudgets();
  }

  // GET /v1/jobs lists the jobs without their metrics, so the latest ε
  // and test accuracy of the list come from GET /v1/jobs/{id}, for the
  // newest LATEST_ROWS jobs, a few requests at a time, and again only when
  // a job's round or state has changed since.
  const LATEST_ROWS = 50;
  const latest = new Map(); // job ID → {round, state, eps, acc}

  async function loadLatest() {
    const need = jobs.slice(0, LATEST_ROWS).filter((j) => {
      const c = latest.get(j.id);
      return !c || c.round !== j.round || c.state !== j.state;
    });
    for (let i = 0; i < need.length; i += 4) {
      await Promise.all(need.slice(i, i + 4).map(async (j) => {
        try {
          const st = await api('/v1/jobs/' + enc(j.id));
          const ev = st.latest_evaluated && st.latest_evaluated.test;
          latest.set(j.id, {
            round: j.round, state: j.state,
            eps: st.latest ? st.latest.epsilon : undefined,
            acc: ev ? ev.accuracy : undefined,
          });
        } catch (e) {
          if (e instanceof AuthError) throw e; // a job that vanished shows without them
        }
      }));
    }
  }

  function stateBadge(state) {
    return el('span', { class: 'state ' + state, text: state.replace('_', ' ') });
  }

  function progressCell(round, rounds) {
    return el('td', { class: 'progress' },
      el('progress', { max: Math.max(rounds || 0, 1), value: Math.min(round || 0, rounds || 0) }),
      el('span', { class: 'rounds', text: (round || 0) + ' / ' + (rounds || '?') }));
  }

  function dpSummary(spec) {
    const dp = spec.dp || {};
    if (!dp.enabled) return 'off';
    return 'z=' + num(dp.noise_multiplier, 3) + ', C=' + num(dp.clip_norm, 3) + ', δ=' + small(dp.delta) +
      (dp.budget ? ' · ' + dp.budget : '');
  }

  function renderJobs() {
    $('#jobs-count').textContent = '(' + jobs.length + ')';
    const rows = jobs.map((j) => {
      const spec = j.spec || {};
      const l = latest.get(j.id) || {};
      const tr = el('tr', { 'data-id': j.id, 'data-state': j.state, 'data-refresh': String(refreshSeq), title: j.message || undefined },
        el('td', { class: 'id' }, el('a', { href: '#job/' + enc(j.id), text: j.id })),
        el('td', { text: spec.name || '' }),
        el('td', { class: 'state-cell' }, stateBadge(j.state)),
        progressCell(j.round, spec.rounds),
        el('td', { class: 'model', text: (spec.model || '') + (spec.dataset ? ' · ' + spec.dataset : '') }),
        el('td', { text: dpSummary(spec) }),
        el('td', { class: 'num eps', text: eps(l.eps) }),
        el('td', { class: 'num acc', text: pct(l.acc) }),
        el('td', { class: 'time', text: when(j.created_at) }));
      tr.addEventListener('click', (ev) => {
        if (ev.target.tagName !== 'A') location.hash = '#job/' + enc(j.id);
      });
      return tr;
    });
    if (rows.length === 0) {
      rows.push(el('tr', {}, el('td', { class: 'empty', colspan: 9, text: 'No jobs yet: submit one with dpfl-client submit or POST /v1/jobs.' })));
    }
    $('#jobs tbody').replaceChildren(...rows);
    highlight();
  }

  function highlight() {
    for (const tr of document.querySelectorAll('#jobs tbody tr')) {
      tr.classList.toggle('selected', tr.dataset.id === selected);
    }
  }

  function typedBudgets() {
    try {
      const v = JSON.parse(sessionStorage.getItem(BUDGETS_KEY) || '[]');
      return Array.isArray(v) ? v.filter((s) => typeof s === 'string') : [];
    } catch (_) {
      return [];
    }
  }
  function setTypedBudgets(names) {
    sessionStorage.setItem(BUDGETS_KEY, JSON.stringify(names));
  }

  async function loadBudgets() {
    const fromJobs = new Set(jobs.map((j) => j.spec && j.spec.dp && j.spec.dp.budget).filter(Boolean));
    const typed = typedBudgets();
    const names = [...new Set([...fromJobs, ...typed])].sort();
    const reports = await Promise.all(names.map(async (name) => {
      try {
        return { name, rep: await api('/v1/budgets/' + enc(name)) };
      } catch (e) {
        if (e instanceof AuthError) throw e;
        return { name, err: e.status === 404 ? 'no such budget' : e.message };
      }
    }));
    const rows = reports.map(({ name, rep, err }) => {
      const remove = typed.includes(name) && !fromJobs.has(name)
        ? el('button', { type: 'button', class: 'remove', text: 'remove', onclick: () => {
          setTypedBudgets(typedBudgets().filter((n) => n !== name));
          refresh();
        } })
        : null;
      if (err) {
        return el('tr', { 'data-budget': name },
          el('td', { text: name }), el('td', { class: 'error', colspan: 8, text: err }), el('td', {}, remove));
      }
      const spent = rep.epsilon || 0;
      const max = rep.epsilon_budget;
      return el('tr', { 'data-budget': name, 'data-remaining': rep.remaining, title: rep.note || undefined },
        el('td', { text: name }),
        el('td', { class: 'num', text: eps(max) }),
        el('td', { class: 'num', text: small(rep.delta) }),
        el('td', { class: 'num', text: eps(rep.epsilon) }),
        el('td', {}, el('meter', { min: 0, max: max, value: Math.min(spent, max), low: 0.5 * max, high: 0.9 * max, optimum: 0 })),
        el('td', { class: 'num remaining', text: eps(rep.remaining) }),
        el('td', { class: 'num', text: eps(rep.available) }),
        el('td', { class: 'num', text: String((rep.jobs || []).length), title: (rep.jobs || []).join(', ') || undefined }),
        el('td', { class: 'num', text: String(rep.running || 0) }),
        el('td', {}, remove));
    });
    if (rows.length === 0) {
      rows.push(el('tr', {}, el('td', { class: 'empty', colspan: 10, text: 'No job names a shared budget; type a name to look one up.' })));
    }
    $('#budgets tbody').replaceChildren(...rows);
  }

  function lookUpBudget(ev) {
    ev.preventDefault();
    const input = $('#budget-name');
    const name = input.value.trim();
    if (!name) return;
    const names = typedBudgets();
    if (!names.includes(name)) setTypedBudgets([...names, name]);
    input.value = '';
    refresh();
  }

  // ---- one job ----------------------------------------------------------

  async function loadJob(id) {
    let st, met, rounds, priv;
    try {
      [st, met, rounds, priv] = await Promise.all([
        api('/v1/jobs/' + enc(id)),
        api('/v1/jobs/' + enc(id) + '/metrics'),
        api('/v1/jobs/' + enc(id) + '/rounds'),
        api('/v1/jobs/' + enc(id) + '/privacy'),
      ]);
    } catch (e) {
      if (e.status === 404) {
        $('#job').hidden = true;
        throw new Error('job ' + id + ' not found');
      }
      throw e;
    }
    if (id !== selected) return; // the user moved on meanwhile
    $('#job').hidden = false;
    renderJob(st, met.rounds || [], rounds.rounds || [], priv);
    document.body.dataset.job = id;
    document.body.dataset.jobRound = String(st.round);
    document.body.dataset.jobState = st.state;
  }

  function facts(dl, pairs) {
    dl.replaceChildren(...pairs.filter(([, v]) => v !== undefined && v !== null && v !== '')
      .map(([k, v]) => el('div', {}, el('dt', { text: k }), el('dd', { text: String(v) }))));
  }

  function renderJob(st, met, rounds, priv) {
    const spec = st.spec || {};
    const dp = spec.dp || {};
    $('#job-id').textContent = st.id;
    $('#job-state').replaceWith(Object.assign(stateBadge(st.state), { id: 'job-state' }));
    $('#job-message').textContent = st.message || '';
    $('#job-message').hidden = !st.message;
    const prog = $('#job-progress');
    prog.max = Math.max(spec.rounds || 0, 1);
    prog.value = Math.min(st.round || 0, spec.rounds || 0);
    $('#job-round').textContent = 'round ' + st.round + ' of ' + spec.rounds +
      (LIVE.has(st.state) && $('#auto').checked ? ' · live' : '');
    const pop = spec.population || {};
    const samp = spec.sampling || {};
    const cl = spec.client || {};
    const test = st.latest_evaluated && st.latest_evaluated.test;
    facts($('#job-facts'), [
      ['Name', spec.name],
      ['Dataset', spec.dataset],
      ['Model', spec.model],
      ['Algorithm', spec.algorithm + (spec.server && spec.server.optimizer ? ' · server ' + spec.server.optimizer : '')],
      ['Population', (pop.source === 'devices' ? 'devices, up to ' : '') + pop.size + ' users' + (pop.partition ? ' · ' + pop.partition : '')],
      ['Sampling', samp.scheme === 'fixed' ? 'fixed cohort of ' + samp.cohort_size : 'Poisson, q=' + num(samp.rate)],
      ['Local training', cl.epochs + ' epoch(s), batch ' + cl.batch_size + ', lr ' + num(cl.lr)],
      ['DP', dp.enabled ? 'on: z=' + num(dp.noise_multiplier) + ', C=' + num(dp.clip_norm) + ', δ=' + small(dp.delta) : 'off (no privacy guarantee)'],
      ['Job ε budget', dp.enabled && dp.epsilon_budget > 0 ? eps(dp.epsilon_budget) : undefined],
      ['Shared budget', dp.budget],
      ['Secure aggregation', spec.secure_aggregation ? 'yes' : 'no'],
      ['Latest test accuracy', test ? pct(test.accuracy) + ' (round ' + st.latest_evaluated.round + ')' : undefined],
      ['ε now', dp.enabled ? eps(priv.epsilon) : undefined],
      ['Created', when(st.created_at)],
      ['Updated', when(st.updated_at)],
    ]);
    $('#job-notes').replaceChildren(...(st.notes || []).map((n) => el('li', { text: n })));

    renderAccuracy(met);
    renderEpsilon(met, priv, dp);
    renderParticipation(rounds, dp, samp, pop);
    renderPrivacy(priv);
    renderLedger(st.id, priv);
  }

  // ---- charts (uPlot) ---------------------------------------------------

  const charts = {}; // key → {u, sig, box}
  const COLORS = ['#2f6fdf', '#e8710a', '#1e8e3e', '#c5221f', '#9334e6', '#12a4af', '#7c6f00', '#5f6368'];

  function dropChart(key) {
    const c = charts[key];
    if (!c) return;
    c.u.destroy();
    delete charts[key];
  }

  // chart draws series against x (rounds) in box, reusing its uPlot
  // instance while the set of series is the same. Each series is
  // {label, values, dash, points}; values may hold nulls.
  function chart(key, box, x, series, yLabel, yFmt, yRange) {
    const sig = series.map((s) => s.label).join('|');
    const data = [x, ...series.map((s) => s.values)];
    box.dataset.points = String(series.length ? series[0].values.filter((v) => v !== null && v !== undefined).length : 0);
    box.hidden = false;
    const c = charts[key];
    if (c && c.sig === sig) {
      c.u.setData(data);
      return;
    }
    dropChart(key);
    const width = Math.max(box.clientWidth || box.parentElement.clientWidth - 32, 280);
    const opts = {
      width,
      height: 220,
      scales: { x: { time: false }, y: yRange ? { range: yRange } : {} },
      legend: { live: false },
      cursor: { drag: { x: true, y: false } },
      series: [
        { label: 'round', value: (u, v) => (v === null || v === undefined ? '—' : String(v)) },
        ...series.map((s, i) => ({
          label: s.label,
          stroke: COLORS[i % COLORS.length],
          width: 2,
          dash: s.dash,
          spanGaps: true,
          points: { show: s.points !== false, size: 5 },
          value: (u, v) => (v === null || v === undefined ? '—' : yFmt(v)),
        })),
      ],
      axes: [
        { label: 'round', incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] },
        { label: yLabel, size: 60, values: (u, vals) => vals.map(yFmt) },
      ],
    };
    box.replaceChildren();
    charts[key] = { u: new uPlot(opts, data, box), sig, box };
  }

  function noChart(key, box, note, text) {
    dropChart(key);
    box.replaceChildren();
    box.hidden = true;
    box.dataset.points = '0';
    note.textContent = text;
    note.hidden = !text;
  }

  function renderAccuracy(met) {
    const box = $('#chart-accuracy');
    const note = $('#chart-accuracy-note');
    const evals = met.filter((m) => m.test || m.eval_users || m.held_out);
    if (evals.length === 0) {
      noChart('accuracy', box, note, 'No evaluation yet: the test set is scored every eval_every rounds and after the last.');
      return;
    }
    note.hidden = true;
    const x = evals.map((m) => m.round);
    const series = [{ label: 'test accuracy', values: evals.map((m) => (m.test ? m.test.accuracy : null)) }];
    if (evals.some((m) => m.eval_users)) {
      series.push({ label: 'eval users (mean)', values: evals.map((m) => (m.eval_users ? m.eval_users.mean_accuracy : null)) });
    }
    if (evals.some((m) => m.held_out)) {
      series.push({ label: 'held-out (weighted)', values: evals.map((m) => (m.held_out ? m.held_out.weighted.accuracy : null)) });
    }
    chart('accuracy', box, x, series, 'accuracy', (v) => pct(v));
  }

  function renderEpsilon(met, priv, dp) {
    const box = $('#chart-epsilon');
    const note = $('#chart-epsilon-note');
    $('#eps-delta').textContent = priv.private && priv.delta ? 'at δ = ' + small(priv.delta) : '';
    if (!dp.enabled) {
      noChart('epsilon', box, note, 'This job trains without DP: it has no ε.');
      return;
    }
    const rows = met.filter((m) => m.epsilon !== undefined && m.epsilon !== null);
    if (rows.length === 0) {
      noChart('epsilon', box, note, 'No round committed yet.');
      return;
    }
    const x = rows.map((m) => m.round);
    const series = [{ label: 'ε', values: rows.map((m) => m.epsilon) }];
    const budget = priv.epsilon_budget || dp.epsilon_budget;
    if (budget > 0) series.push({ label: 'job ε budget', values: x.map(() => budget), dash: [6, 4], points: false });
    const acc = rows[rows.length - 1].accountant;
    note.textContent = acc ? 'Each round\'s ε as the server recorded it (' + acc + ' accountant).' : '';
    note.hidden = !acc;
    chart('epsilon', box, x, series, 'ε', (v) => num(v, 3));
  }

  const COUNTS = [
    ['selected', 'selected', (r) => r.selected],
    ['reported', 'reported', (r) => r.reported],
    ['unavailable', 'unavailable', (r) => r.unavailable],
    ['dropped_out', 'dropped out', (r) => r.dropped_out],
    ['late', 'late', (r) => r.late],
    ['stragglers', 'stragglers', (r) => r.stragglers],
    ['rejected', 'rejected', (r) => r.rejected],
    ['secagg', 'secagg survivors', (r) => (r.secagg ? r.secagg.survivors : undefined)],
  ];

  function renderParticipation(rounds, dp, samp, pop) {
    const box = $('#chart-participation');
    const note = $('#chart-participation-note');
    const present = COUNTS.filter(([, , get]) => rounds.some((r) => get(r) !== undefined));
    const privNote = !dp.enabled ? '' : samp.scheme === 'fixed'
      ? 'Under DP the per-round counts are private: the API releases only the configured cohort size.'
      : 'Under DP the per-round counts are private and the API does not release them. Configured: ' +
        'Poisson sampling at q = ' + num(samp.rate) + ' of ' + pop.size + ' users, ' + num(samp.rate * pop.size, 3) +
        ' expected per round.';
    if (rounds.length === 0 || present.length === 0) {
      noChart('participation', box, note, rounds.length === 0 ? 'No round committed yet.' : privNote);
      return;
    }
    note.textContent = privNote;
    note.hidden = !privNote;
    const x = rounds.map((r) => r.round);
    const series = present.map(([, label, get]) => ({ label, values: rounds.map((r) => get(r) || 0), points: rounds.length <= 60 }));
    chart('participation', box, x, series, 'clients', (v) => num(v, 6));
  }

  function renderPrivacy(priv) {
    const a = priv.accounting || {};
    const est = (e) => (e && e.valid && e.epsilon !== undefined ? eps(e.epsilon) : e && e.note ? 'n/a (' + e.note + ')' : undefined);
    const emp = priv.empirical_epsilon;
    facts($('#privacy-facts'), priv.private ? [
      ['ε (best valid bound)', priv.epsilon !== undefined ? eps(priv.epsilon) + (priv.accountant ? ' · ' + priv.accountant : '') : '— (no event yet)'],
      ['δ', small(priv.delta)],
      ['Adjacency', priv.adjacency ? priv.adjacency.replace('_', '/') : undefined],
      ['RDP ε', est(a.rdp) !== undefined ? est(a.rdp) + (a.rdp && a.rdp.order ? ' (α = ' + num(a.rdp.order) + ')' : '') : undefined],
      ['PLD ε', est(a.pld) !== undefined ? est(a.pld) + (a.pld_method ? ' (' + a.pld_method + ')' : '') : undefined],
      ['Job ε budget', priv.epsilon_budget ? eps(priv.epsilon_budget) : undefined],
      ['Remaining ε', priv.remaining !== undefined ? eps(priv.remaining) : undefined],
      ['Committed rounds', priv.rounds],
      ['Ledger events', (priv.events || []).length + (priv.extra_events ? ' (' + priv.extra_events + ' extra)' : '')],
      ['Abort δ', priv.abort_delta ? small(priv.abort_delta) : undefined],
      ['Empirical ε (canaries)', emp ? (emp.estimate !== undefined
        ? num(emp.estimate, 3) + ' [' + num(emp.lower, 3) + ', ' + num(emp.upper, 3) + '] at ' + pct(emp.confidence) + (emp.alarm ? ' · ALARM' : '')
        : 'pending') : undefined],
    ] : [['Private', 'no'], ['Committed rounds', priv.rounds]]);
    const notes = [priv.note, priv.uncovered ? 'Not a proven bound: ' + priv.uncovered : '', emp && emp.note].filter(Boolean);
    $('#privacy-notes').textContent = notes.join(' ');
    $('#privacy-notes').hidden = notes.length === 0;
  }

  function ledgerRow(e) {
    let ev = e.event;
    let text;
    try {
      text = describeEvent(ev);
    } catch (_) {
      text = JSON.stringify(ev);
    }
    return el('tr', { class: 'entry', 'data-seq': e.seq },
      el('td', { class: 'num', text: String(e.seq) }),
      el('td', { class: 'num', text: String(e.round) }),
      el('td', { class: 'event', text, title: JSON.stringify(ev) }),
      el('td', { class: 'time', text: utc(e.time) }));
  }

  // renderLedger appends the new entries when the table already holds an
  // earlier prefix of this job's ledger, and rebuilds it otherwise.
  function renderLedger(id, priv) {
    const body = $('#ledger tbody');
    const events = priv.events || [];
    const extra = priv.extra_events ? ', ' + priv.extra_events + ' beyond one per round' : '';
    $('#ledger-count').textContent = '(' + events.length + ' event' + (events.length === 1 ? '' : 's') +
      ' for ' + priv.rounds + ' committed round' + (priv.rounds === 1 ? '' : 's') + extra + ')';
    const have = body.dataset.job === id ? body.querySelectorAll('tr.entry') : [];
    const prefix = have.length <= events.length &&
      Array.from(have).every((tr, i) => tr.dataset.seq === String(events[i].seq));
    if (events.length === 0) {
      body.replaceChildren(el('tr', {}, el('td', { class: 'empty', colspan: 4, text: priv.note || 'No ledger event yet.' })));
    } else if (body.dataset.job === id && prefix && have.length > 0) {
      body.append(...events.slice(have.length).map(ledgerRow));
    } else {
      body.replaceChildren(...events.map(ledgerRow));
    }
    body.dataset.job = id;
  }

  // ---- wiring -----------------------------------------------------------

  function resizeCharts() {
    for (const c of Object.values(charts)) {
      c.u.setSize({ width: Math.max(c.box.parentElement.clientWidth - 32, 280), height: 220 });
    }
  }

  function start() {
    $('#login-form').addEventListener('submit', login);
    $('#budget-form').addEventListener('submit', lookUpBudget);
    $('#logout').addEventListener('click', () => signOut(''));
    $('#refresh').addEventListener('click', () => refresh());
    $('#auto').addEventListener('change', () => refresh());
    $('#home').addEventListener('click', (ev) => {
      ev.preventDefault();
      history.pushState(null, '', location.pathname);
      route();
    });
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => {
      if (!document.hidden && live) refresh();
    });
    let resizing = null;
    window.addEventListener('resize', () => {
      clearTimeout(resizing);
      resizing = setTimeout(resizeCharts, 150);
    });
    if (typeof uPlot === 'undefined') {
      showLoginError('The chart library did not load (vendor/uplot).');
    }
    if (sessionStorage.getItem(TOKEN_KEY)) enterApp();
    else signOut('');
  }

  start();
})();
