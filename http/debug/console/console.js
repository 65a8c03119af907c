'use strict';
// berthd's operator console: reads the debug listener's JSON API and its event
// stream, renders with DOM calls only (never HTML from data). With debug.token
// the page is opened as /?token=…; the token is kept in this tab's
// sessionStorage, removed from the address bar, and sent on every request as
// "Authorization: Bearer …".
(() => {
  const REFRESH_MS = 2000; // polling cadence of everything the stream does not carry
  const RETRY_STREAM_MS = 5000; // how soon a broken stream is opened again
  const MAX_TRANSITIONS = 200; // rows kept in the transitions panel
  const TOKEN_KEY = 'berth-debug-token';

  // --- the token -------------------------------------------------------------
  const params = new URLSearchParams(location.search);
  let token = params.get('token') || '';
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else token = sessionStorage.getItem(TOKEN_KEY) || '';
  } catch (e) { /* storage disabled: the token lives in this page only */ }
  if (params.has('token')) {
    params.delete('token');
    const q = params.toString();
    history.replaceState(null, '', location.pathname + (q ? '?' + q : '') + location.hash);
  }
  const headers = () => (token ? { Authorization: 'Bearer ' + token } : {});

  async function getJSON(path) {
    const r = await fetch(path, { headers: headers(), cache: 'no-store' });
    let body = {};
    try { body = await r.json(); } catch (e) { /* not JSON */ }
    if (!r.ok) throw new Error(path + ': ' + r.status + ' ' + (body.error || r.statusText));
    return body;
  }

  // --- state -----------------------------------------------------------------
  const state = {
    tree: null, leases: [], outbox: null, passes: [], transitions: [], domains: null,
    nextSeq: 0, live: false, selected: null, errors: new Map(),
  };

  // --- DOM helpers -----------------------------------------------------------
  const $ = (id) => document.getElementById(id);
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k === 'title') e.title = v;
      else e.setAttribute(k, String(v));
    }
    for (const k of kids) {
      if (k === undefined || k === null) continue;
      e.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return e;
  }
  const td = (v, cls) => el('td', { class: cls, text: v === undefined || v === null ? '' : String(v) });
  const replace = (node, kids) => node.replaceChildren(...kids);
  const short = (id) => (id ? id.slice(0, 8) : '');

  function fmtAge(sec) {
    if (sec === undefined || sec === null || Number.isNaN(sec)) return '';
    sec = Math.max(0, Math.round(sec));
    if (sec < 60) return sec + 's';
    const m = Math.floor(sec / 60), s = sec % 60;
    if (m < 60) return m + 'm ' + s + 's';
    const h = Math.floor(m / 60);
    if (h < 48) return h + 'h ' + (m % 60) + 'm';
    return Math.floor(h / 24) + 'd ' + (h % 24) + 'h';
  }
  function fmtTime(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (Number.isNaN(d.getTime()) || d.getUTCFullYear() < 2) return '';
    return d.toISOString().replace('T', ' ').slice(0, 19) + 'Z';
  }
  const timeEl = (iso) => el('time', { datetime: iso || undefined, text: fmtTime(iso) });
  const fmtDuration = (sec) => (sec < 1 ? Math.round(sec * 1000) + 'ms' : sec.toFixed(1) + 's');
  // rowsOr is rows, or one row saying there are none.
  const rowsOr = (rows, cols, what) => (rows.length ? rows : [el('tr', {}, el('td', { colspan: cols, class: 'state', text: what }))]);

  function setError(key, err) {
    if (err) state.errors.set(key, String(err.message || err));
    else state.errors.delete(key);
    $('errors').textContent = [...state.errors.values()].join(' · ');
  }
  function setLive(live) {
    state.live = live;
    const c = $('conn');
    c.dataset.mode = live ? 'sse' : 'polling';
    c.textContent = live ? 'live (event stream)' : 'polling every ' + REFRESH_MS / 1000 + 's';
  }

  // --- actors ----------------------------------------------------------------
  function renderTree() {
    const root = state.tree;
    if (!root) return;
    let count = 0;
    const node = (n) => {
      count++;
      const name = n.path.split('/').pop();
      const line = el('span', {},
        el('strong', { text: name }), ' ',
        el('span', { class: 'kind', text: '[' + n.kind + ']' }), ' ',
        el('span', { class: 'status' + (n.status !== 'ok' ? ' bad' : ''), text: n.status }), ' · mailbox ',
        el('span', { class: 'mailbox', text: n.mailbox_depth }), ' · restarts ',
        el('span', { class: 'restarts' + (n.restarts > 0 ? ' restarted' : ''), text: n.restarts }), ' · in flight ',
        el('span', { class: 'in-flight', text: n.in_flight }),
        n.state ? el('span', { class: 'state', text: ' — ' + n.state }) : null);
      const li = el('li', {
        'data-actor': n.path, 'data-kind': n.kind, 'data-status': n.status,
        'data-restarts': n.restarts, 'data-mailbox': n.mailbox_depth, 'data-in-flight': n.in_flight,
      }, line);
      const kids = n.children || [];
      if (kids.length || n.omitted_children) {
        const ul = el('ul', {}, ...kids.map(node));
        if (n.omitted_children) ul.append(el('li', { class: 'state', text: '… ' + n.omitted_children + ' more (GET /debug/actors has them all)' }));
        li.append(ul);
      }
      return li;
    };
    replace($('tree'), [el('ul', {}, node(root))]);
    $('actor-count').textContent = count + ' actors';
  }

  // --- leases ----------------------------------------------------------------
  function ports(row) {
    const out = [];
    for (const svc of row.services || []) {
      for (const inst of svc.instances || []) {
        for (const [key, b] of Object.entries(inst.ports || {})) {
          out.push(b.host_ip + ':' + b.host_port + ' → ' + svc.name + '/' + inst.index + ' ' + key);
        }
      }
    }
    return out;
  }
  function services(row) {
    return (row.services || []).map((s) => {
      const states = (s.instances || []).map((i) => i.state);
      return s.name + ' ×' + (s.instances || []).length + (states.length ? ' (' + [...new Set(states)].join(', ') + ')' : '');
    }).join('; ');
  }
  function renderLeases() {
    const rows = state.leases.map((l) => {
      const budget = l.terminal_budget ? l.terminal_budget.verdict + ' (' + l.terminal_budget.consecutive_failures + ' in a row)' : '';
      const tr = el('tr', {
        'data-lease': l.lease_uuid, 'data-status': l.status, 'data-lease-status': l.lease_status,
        'data-fail-count': l.fail_count, class: state.selected === l.lease_uuid ? 'selected' : undefined,
      },
      el('td', { title: l.lease_uuid }, el('code', { text: l.lease_uuid })),
      td(l.tenant),
      td(l.lease_status && l.lease_status !== l.status ? l.status + ' (' + l.lease_status + ')' : l.status, 's-' + (l.lease_status || l.status)),
      td(fmtAge(l.age_seconds), 'num'),
      td(l.fail_count, 'num'),
      td(budget, l.terminal_budget && l.terminal_budget.verdict === 'exhausted' ? 'bad' : undefined),
      td(services(l) + (l.instances_error ? ' — ' + l.instances_error : '')),
      el('td', { class: 'mono ports' }, ...ports(l).flatMap((p, i) => (i ? [el('br'), p] : [p]))),
      td([l.reason, l.message].filter(Boolean).join(' — ')));
      tr.addEventListener('click', () => select(l.lease_uuid));
      return tr;
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 9, class: 'state', text: 'no leases' })));
    replace($('leases'), rows);
    $('lease-count').textContent = state.leases.length + ' leases';
  }

  // --- a lease's history -----------------------------------------------------
  function select(id) {
    state.selected = id;
    if (location.hash !== '#lease=' + id) history.replaceState(null, '', '#lease=' + id);
    renderLeases();
    loadDetail(id);
  }
  function closeDetail() {
    state.selected = null;
    $('detail').hidden = true;
    history.replaceState(null, '', location.pathname + location.search);
    renderLeases();
  }
  async function loadDetail(id) {
    try {
      const h = await getJSON('/debug/leases/' + encodeURIComponent(id));
      if (state.selected !== id) return;
      renderDetail(h);
      setError('detail', null);
    } catch (e) {
      setError('detail', e);
    }
  }
  function renderDetail(h) {
    const l = h.lease;
    const d = $('detail');
    d.hidden = false;
    d.dataset.detailLease = l.lease_uuid;
    $('detail-title').textContent = l.lease_uuid;
    $('detail-summary').textContent = [
      l.status + (l.lease_status && l.lease_status !== l.status ? ' (' + l.lease_status + ')' : ''),
      'tenant ' + (l.tenant || '?'), 'created ' + fmtTime(l.created_at), 'fail_count ' + l.fail_count,
      l.actor ? 'actor ' + l.actor : 'no lease actor',
    ].join(' · ');
    $('detail-compacted').textContent = h.compacted_before_seq
      ? 'events before seq ' + h.compacted_before_seq + ' were compacted into a snapshot' : '';
    replace($('detail-events'), rowsOr((h.events || []).map((e) => el('tr', { 'data-event-seq': e.seq, 'data-event-type': e.type },
      td(e.seq, 'num'), el('td', {}, timeEl(e.at)), td(e.summary),
      el('td', {}, el('details', {}, el('summary', { text: 'json' }), el('pre', { text: JSON.stringify(e.data, null, 2) }))))), 4, 'no events journaled'));
    replace($('detail-callbacks'), rowsOr((h.callbacks || []).map((c) => el('tr', { 'data-delivery': c.delivery_id, 'data-state': c.state },
      el('td', {}, timeEl(c.created_at)), td(c.kind), td(c.status), td(c.url_path, 'mono'), td(c.state),
      td(c.attempts, 'num'), el('td', {}, timeEl(c.last_attempt_at)), td(c.last_error, 'err'), el('td', {}, timeEl(c.delivered_at)))),
    9, 'none queued, none delivered since the outbox started'));
    $('detail-releases-error').textContent = h.releases_error || '';
    replace($('detail-releases'), rowsOr((h.releases || []).map((r) => el('tr', { 'data-release': r.version },
      td('v' + r.version), td(r.status), el('td', {}, timeEl(r.created_at)), td(r.reason), td(r.message))), 5, 'no releases'));
    replace($('detail-diagnostics'), rowsOr((h.diagnostics || []).map((g) => el('tr', {},
      el('td', {}, timeEl(g.at)), td(g.kind), td(g.service + '/' + g.index), td(g.state), td(g.reason), td(g.bytes, 'num'))),
    6, 'no failure captured'));
    renderIngress(h);
  }

  // --- names and custom domains (ingress) ---------------------------------------
  // gateCells are a DNS gate's state, attempts, last and next check, last verdict.
  const gateCells = (g) => (g ? [
    td(g.state + (g.checking ? ' (checking)' : ''), 'g-' + g.state), td(g.attempts, 'num'),
    el('td', {}, timeEl(g.last_check_at)), el('td', {}, timeEl(g.next_check_at)), td(g.last_result),
  ] : [td(''), td(''), td(''), td(''), td('')]);
  function renderIngress(h) {
    const ing = h.ingress;
    $('detail-ingress-error').textContent = h.ingress_error || (ing && ing.gates_error) || '';
    const rows = ((ing && ing.services) || []).map((s) => el('tr', { 'data-ingress-service': s.name, 'data-gate': s.gate ? s.gate.state : undefined },
      td(s.name),
      el('td', { class: 'mono' }, ...(s.fqdns || []).flatMap((n, i) => [i ? el('br') : null, el('span', { 'data-fqdn': n, text: i + ': ' + n })])),
      el('td', { 'data-custom-domain': s.custom_domain || s.routed_domain || undefined, text: s.custom_domain || s.routed_domain || '' }),
      td(s.routed_domain ? (s.custom_domain && s.custom_domain !== s.routed_domain ? 'as ' + s.routed_domain : 'yes') : (s.custom_domain ? 'no' : '')),
      ...gateCells(s.gate)));
    replace($('detail-ingress'), rowsOr(rows, 9, 'no names under the wildcard domain and no custom domain (ingress off)'));
  }
  function renderDomains() {
    const d = state.domains;
    if (!d) return;
    $('domains-state').textContent = d.enabled ? d.gates.length + ' held' : 'off (ingress is off)';
    const rows = d.gates.map((g) => {
      const tr = el('tr', { 'data-gate-lease': g.lease_uuid, 'data-gate-domain': g.domain, 'data-gate': g.state },
        el('td', { title: g.lease_uuid }, el('code', { text: short(g.lease_uuid) })), td(g.domain), ...gateCells(g));
      tr.addEventListener('click', () => select(g.lease_uuid));
      return tr;
    });
    replace($('domains'), rowsOr(rows, 7, d.enabled ? 'no custom domain waits or is open' : 'no DNS gate'));
  }

  // --- outbox, passes, transitions --------------------------------------------
  function renderOutbox() {
    const o = state.outbox;
    if (!o) return;
    $('outbox-total').textContent = o.total_queued + ' queued' + (o.attempts_error ? ' — attempts unknown: ' + o.attempts_error : '');
    const rows = o.leases.map((l) => el('tr', { 'data-outbox-lease': l.lease_uuid, 'data-queued': l.queued },
      el('td', { title: l.lease_uuid }, el('code', { text: short(l.lease_uuid) })), td(l.queued, 'num'),
      td(fmtAge(l.oldest_age_seconds), 'num'), td(l.attempts, 'num'), td(l.last_error, 'err'),
      td(Object.entries(l.kinds || {}).map(([k, n]) => k + ' ' + n).join(', '))));
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 6, class: 'state', text: 'nothing queued' })));
    replace($('outbox'), rows);
  }
  function renderFreshness() {
    replace($('freshness'), state.passes.map((p) => el('tr', { 'data-pass': p.name, 'data-freshness': p.status },
      td(p.name), td(p.status, 'f-' + p.status), el('td', {}, timeEl(p.last_pass_at)),
      td(p.last_pass_at ? fmtAge(p.age_seconds) : '', 'num'), td(p.last_pass_at ? fmtDuration(p.duration_seconds) : '', 'num'),
      td(p.outcome + (p.detail ? ' — ' + p.detail : ''), p.outcome.startsWith('error') ? 'err' : undefined))));
  }
  function addTransitions(list) {
    for (const t of list) {
      if (t.seq <= state.nextSeq && state.transitions.some((x) => x.seq === t.seq)) continue;
      state.transitions.unshift(t);
      state.nextSeq = Math.max(state.nextSeq, t.seq);
    }
    state.transitions.sort((a, b) => b.seq - a.seq);
    state.transitions.length = Math.min(state.transitions.length, MAX_TRANSITIONS);
    renderTransitions();
  }
  function renderTransitions() {
    const rows = state.transitions.map((t) => {
      const tr = el('tr', { 'data-transition': t.seq, 'data-transition-lease': t.lease_uuid, 'data-to': t.to },
        td(t.seq, 'num'), el('td', {}, timeEl(t.at)),
        el('td', { title: t.lease_uuid }, el('code', { text: short(t.lease_uuid) })),
        td((t.from || '(admitted)') + ' → ' + t.to, 's-' + t.to), td(t.reason));
      tr.addEventListener('click', () => select(t.lease_uuid));
      return tr;
    });
    if (!rows.length) rows.push(el('tr', {}, el('td', { colspan: 5, class: 'state', text: 'none yet' })));
    replace($('transitions'), rows);
  }

  // --- refreshing --------------------------------------------------------------
  async function pollTransitions() {
    const r = await getJSON('/debug/transitions?limit=1024&since=' + state.nextSeq);
    if (r.next < state.nextSeq) { state.transitions = []; state.nextSeq = 0; } // berthd restarted
    addTransitions(r.transitions || []);
  }
  const jobs = {
    leases: () => getJSON('/debug/leases').then((b) => { state.leases = b.leases || []; renderLeases(); }),
    outbox: () => getJSON('/debug/outbox').then((b) => { state.outbox = b; renderOutbox(); }),
    freshness: () => getJSON('/debug/freshness').then((b) => { state.passes = b.passes || []; renderFreshness(); }),
    domains: () => getJSON('/debug/domains').then((b) => { state.domains = b; renderDomains(); }),
    actors: () => getJSON('/debug/actors').then((t) => { state.tree = t; renderTree(); }),
    transitions: pollTransitions,
  };
  async function refresh() {
    const names = ['leases', 'outbox', 'freshness', 'domains'];
    if (!state.live) names.push('actors', 'transitions'); // the stream carries these while it is up
    const done = await Promise.allSettled(names.map((n) => jobs[n]()));
    done.forEach((d, i) => setError(names[i], d.status === 'rejected' ? d.reason : null));
    if (state.selected) await loadDetail(state.selected);
    $('updated').textContent = fmtTime(new Date().toISOString());
  }
  const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

  // The event stream, read with fetch (EventSource cannot send the token).
  function onEvent(block) {
    let event = 'message';
    const data = [];
    for (const line of block.split('\n')) {
      if (!line || line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const field = c < 0 ? line : line.slice(0, c);
      let value = c < 0 ? '' : line.slice(c + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (!data.length) return;
    const v = JSON.parse(data.join('\n'));
    if (event === 'transition') addTransitions([v]);
    else if (event === 'tree') { state.tree = v; renderTree(); }
    else if (event === 'gap') setError('stream-gap', new Error(v.missed + ' transitions were dropped before they were shown'));
  }
  async function stream() {
    for (;;) {
      try {
        const r = await fetch('/debug/events?since=' + state.nextSeq, { headers: headers(), cache: 'no-store' });
        if (!r.ok || !r.body) throw new Error('/debug/events: ' + r.status);
        setLive(true);
        setError('stream', null);
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            onEvent(buf.slice(0, i));
            buf = buf.slice(i + 2);
          }
        }
      } catch (e) {
        setError('stream', e);
      }
      setLive(false);
      await sleep(RETRY_STREAM_MS);
    }
  }

  async function main() {
    $('detail-close').addEventListener('click', closeDetail);
    const m = /^#lease=([0-9a-f-]{36})$/.exec(location.hash);
    if (m) state.selected = m[1];
    setLive(false);
    await refresh();
    stream();
    for (;;) {
      await sleep(REFRESH_MS);
      await refresh();
    }
  }
  main();
})();
