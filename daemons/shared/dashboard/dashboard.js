// The fleet dashboard page: renders the operator's read model (model.json, pushed on every change through the
// server-sent event stream `events`) into the tables and the site graph. Text goes in through textContent only,
// so nothing in the model can become markup. Falls back to polling when the stream is refused.
const POLL_MS = 2000;
const SVG_NS = 'http://www.w3.org/2000/svg';

const $ = (id) => document.getElementById(id);

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function shortRevision(revision) {
  return typeof revision === 'string' ? revision.slice(0, 12) : '—';
}

function revisionCell(revision) {
  const td = el('td');
  if (typeof revision === 'string') {
    const code = el('code', shortRevision(revision));
    code.title = revision;
    td.append(code);
  } else {
    td.textContent = '—';
  }
  return td;
}

function num(value, digits) {
  return typeof value === 'number' ? value.toFixed(digits) : '—';
}

function stateClass(value) {
  if (['Active', 'True', 'alive', 'self', 'new_and_existing', 'Distributed', 'Ready', 'yes', 'Local', 'ready'].includes(value)) return 'state-ok';
  if (['Unknown', 'unknown', 'suspect', 'existing_only', 'Pending', 'Connecting', 'Discovered', 'Initializing', 'Degraded', 'Retained', 'remote', 'cold', 'ready_degraded'].includes(value)) return 'state-warn';
  return 'state-bad';
}

function stateCell(value, field) {
  const td = el('td', value ?? '—', value === null || value === undefined ? '' : stateClass(value));
  if (field) td.dataset.field = field;
  return td;
}

function fill(tableId, rows, emptyText, columns) {
  const body = $(tableId).tBodies[0];
  const next = rows.length === 0 ? [emptyRow(emptyText, columns)] : rows;
  body.replaceChildren(...next);
}

function emptyRow(text, columns) {
  const tr = el('tr');
  const td = el('td', text, 'empty');
  td.colSpan = columns;
  tr.append(td);
  return tr;
}

function rowHeader(text) {
  const th = el('th', text);
  th.scope = 'row';
  return th;
}

function ago(iso, now) {
  if (typeof iso !== 'string') return '—';
  const seconds = Math.max(0, Math.round((Date.parse(now) - Date.parse(iso)) / 1000));
  return Number.isFinite(seconds) ? `${seconds} s ago` : iso;
}

function renderNetwork(view) {
  $('site-name').textContent = `· site ${view.site}`;
  const dl = $('network');
  const entries = view.network === null
    ? [['GridNetwork', 'none yet']]
    : [['GridNetwork', view.network.name], ['Phase', view.network.phase], ['Grid ID', view.network.gridId ?? '—'], ['Connected sites', view.network.connectedSites ?? '—']];
  dl.replaceChildren(...entries.flatMap(([k, v]) => [el('dt', k), el('dd', v)]));
}

function renderGraph(view) {
  const svg = $('graph');
  for (const node of [...svg.querySelectorAll('g')]) node.remove();
  const sites = view.sites;
  // Sites on an ellipse, the first (this site) on the left; labels sit under the nodes so long names stay readable.
  const cx = 160;
  const cy = sites.length <= 2 ? 45 : 75;
  const height = sites.length <= 2 ? 110 : 180;
  svg.setAttribute('viewBox', `0 0 320 ${height}`);
  svg.setAttribute('height', String(height));
  const rx = sites.length <= 1 ? 0 : 105;
  const ry = sites.length <= 2 ? 0 : 50;
  const position = new Map();
  sites.forEach((site, i) => {
    const angle = Math.PI + (2 * Math.PI * i) / Math.max(1, sites.length);
    position.set(site.name, [cx + rx * Math.cos(angle), cy + ry * Math.sin(angle)]);
  });
  const g = document.createElementNS(SVG_NS, 'g');
  for (const link of view.links) {
    const a = position.get(link.from);
    const b = position.get(link.to);
    if (!a || !b) continue;
    const line = document.createElementNS(SVG_NS, 'line');
    line.setAttribute('x1', a[0]); line.setAttribute('y1', a[1]);
    line.setAttribute('x2', b[0]); line.setAttribute('y2', b[1]);
    line.setAttribute('class', link.state === 'alive' ? 'link' : 'link down');
    g.append(line);
  }
  for (const site of sites) {
    const [x, y] = position.get(site.name);
    const circle = document.createElementNS(SVG_NS, 'circle');
    circle.setAttribute('cx', x); circle.setAttribute('cy', y); circle.setAttribute('r', 14);
    if (site.local) circle.setAttribute('class', 'local');
    const name = document.createElementNS(SVG_NS, 'text');
    name.setAttribute('x', x); name.setAttribute('y', y + 30);
    name.setAttribute('class', 'name');
    name.textContent = site.local ? `${site.name} (this site)` : site.name;
    const phase = document.createElementNS(SVG_NS, 'text');
    phase.setAttribute('x', x); phase.setAttribute('y', y + 45);
    phase.textContent = site.phase;
    g.append(circle, name, phase);
  }
  svg.append(g);
  $('graph-desc').textContent = view.links.length === 0
    ? `Only site ${view.site} is known.`
    : view.links.map((l) => `${l.from} to ${l.to}: ${l.state}`).join('; ');
}

function renderSites(view) {
  fill('sites', view.sites.map((s) => {
    const tr = el('tr');
    tr.dataset.site = s.name;
    tr.append(rowHeader(s.local ? `${s.name} (this site)` : s.name), stateCell(s.phase, 'phase'), el('td', s.reason || '—'),
      stateCell(s.gossip, 'gossip'), el('td', ago(s.lastProbeTime, view.generatedAt)), el('td', s.rttMs === null ? '—' : `${s.rttMs} ms`, 'num'));
    return tr;
  }), 'No GridSites yet.', 6);
}

function breakdownText(p) {
  if (p.score === null) return '—';
  const b = p.scoreBreakdown;
  if (!b) return num(p.score, 3);
  return `${num(p.score, 3)} (${[b.locality, b.queue_depth, b.kv_cache, b.prefix_cache, b.latency, b.cost].map((v) => num(v, 2)).join(' / ')})`;
}

function renderProviders(view) {
  fill('providers', view.providers.map((p) => {
    const tr = el('tr');
    tr.dataset.provider = `${p.site}/${p.cluster}`;
    const admission = el('td', p.fresh === false ? `${p.admission} (stale)` : p.admission, stateClass(p.admission.split(' ')[0]));
    admission.dataset.field = 'admission';
    tr.append(el('td', p.site), rowHeader(p.cluster), stateCell(p.ready ?? (p.site === view.site ? 'Unknown' : 'remote'), 'ready'), admission,
      el('td', num(p.queueDepth, 2), 'num'), el('td', p.kvCacheUtilization === null ? '—' : `${Math.round(p.kvCacheUtilization * 100)} %`, 'num'),
      el('td', breakdownText(p)), el('td', num(p.requestsPerSecond, 2), 'num'));
    return tr;
  }), 'No providers in this site\'s overlays.', 8);
}

function renderGateways(view) {
  const rows = [];
  for (const g of view.gateways) {
    const replicas = g.replicas.length === 0 ? [null] : g.replicas;
    for (const r of replicas) {
      const tr = el('tr');
      tr.dataset.gateway = g.gateway;
      if (r) tr.dataset.replica = r.replica;
      const head = rowHeader(`${g.namespace}/${g.gateway}`);
      const published = revisionCell(g.publishedRevision);
      published.dataset.field = 'published';
      const accepted = revisionCell(r?.acceptedRevision ?? null);
      accepted.dataset.field = 'accepted';
      const serving = revisionCell(r?.servingRevision ?? null);
      serving.dataset.field = 'serving';
      const agrees = r === null || r.agrees === null ? el('td', r === null ? 'no replica observed' : 'unknown', 'state-warn') : el('td', r.agrees ? 'yes' : 'no', r.agrees ? 'state-ok' : 'state-bad');
      agrees.dataset.field = 'agrees';
      tr.append(head, published, el('td', r?.replica ?? '—'), accepted, serving, agrees);
      rows.push(tr);
    }
  }
  fill('gateways', rows, 'No overlay published yet.', 6);
}

function renderDelivery(view) {
  fill('delivery', view.delivery.map((d) => {
    const tr = el('tr');
    tr.dataset.replica = d.replica;
    const configMap = el('td', d.configMap === null ? '—' : d.configMap.split('/').pop());
    if (d.configMap !== null) configMap.title = d.configMap;
    tr.append(rowHeader(d.replica), configMap, stateCell(d.state, 'state'), revisionCell(d.writtenRevision),
      el('td', d.lastOutcome ?? '—'), el('td', d.degradedReason ?? '—'), el('td', d.reconnects ?? '—', 'num'));
    return tr;
  }), 'No overlay-sync sidecars configured for this operator.', 7);
}

function renderTransitions(view) {
  fill('transitions', view.transitions.map((t) => {
    const tr = el('tr');
    const time = el('time', new Date(t.at).toLocaleTimeString());
    time.dateTime = t.at;
    const when = el('td');
    when.append(time);
    tr.append(when, rowHeader(`${t.kind} ${t.name}`), el('td', t.from ?? '—'), el('td', t.to, stateClass(t.to.split(' ')[0])), el('td', t.reason || '—'));
    return tr;
  }), 'No transitions seen yet.', 5);
}

function renderBudgets(view) {
  fill('budgets', view.budgets.map((b) => {
    const tr = el('tr');
    tr.append(rowHeader(b.tenantId), el('td', num(b.spendUsd, 2), 'num'), el('td', num(b.capUsd, 2), 'num'),
      el('td', `${Math.round(b.spendRatio * 100)} %`, b.spendRatio >= 1 ? 'num state-bad' : b.spendRatio >= 0.8 ? 'num state-warn' : 'num'));
    return tr;
  }), 'No budgetPolicy tenants.', 4);
}

function setConnection(text) {
  if ($('connection').textContent !== text) $('connection').textContent = text;
}

function render(view) {
  renderNetwork(view);
  renderGraph(view);
  renderSites(view);
  renderProviders(view);
  renderGateways(view);
  renderDelivery(view);
  renderTransitions(view);
  renderBudgets(view);
  document.body.dataset.generatedAt = view.generatedAt;
  // The status region is announced by screen readers, so it changes only with the connection or a failed read;
  // the update time beside it is not announced.
  setConnection(view.unreadable.length === 0 ? 'Live' : `Live · could not read ${view.unreadable.join(', ')}`);
  $('updated').textContent = `· updated ${new Date(view.generatedAt).toLocaleTimeString()}`;
}

function poll() {
  fetch('model.json', { cache: 'no-store' })
    .then((r) => (r.ok ? r.json() : Promise.reject(new Error(`HTTP ${r.status}`))))
    .then(render, () => setConnection('Operator not answering; retrying…'))
    .finally(() => setTimeout(poll, POLL_MS));
}

function connect() {
  if (typeof EventSource === 'undefined') {
    poll();
    return;
  }
  const events = new EventSource('events');
  events.onmessage = (event) => render(JSON.parse(event.data));
  events.onerror = () => {
    if (events.readyState === EventSource.CLOSED) {
      setConnection('Live stream refused; polling.');
      poll();
    } else {
      setConnection('Reconnecting…');
    }
  };
}

connect();
