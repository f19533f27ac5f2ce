// A trace as a waterfall picture (SVG): one row per span, nested under its parent, a bar from its start to its end on
// a shared time axis, labelled with its service, name and duration, and a tick where the first byte arrived. Made
// from the spans a real OTLP receiver decoded (test/shared/otlp-receiver.ts), for docs/observability.md's picture of a trace.
import type { ReceivedSpan } from '../shared/otlp-receiver.ts';

export interface WaterfallRow {
  readonly span: ReceivedSpan;
  readonly depth: number;
}

/** The spans of one trace in tree order: each parent, then its children by start time. Orphans are roots. */
export function waterfallRows(spans: readonly ReceivedSpan[]): WaterfallRow[] {
  const ids = new Set(spans.map((s) => s.spanId));
  const children = new Map<string, ReceivedSpan[]>();
  const roots: ReceivedSpan[] = [];
  for (const span of spans) {
    if (span.parentSpanId === '' || !ids.has(span.parentSpanId)) roots.push(span);
    else children.set(span.parentSpanId, [...(children.get(span.parentSpanId) ?? []), span]);
  }
  const byStart = (a: ReceivedSpan, b: ReceivedSpan): number =>
    a.startTimeUnixNano < b.startTimeUnixNano ? -1 : a.startTimeUnixNano > b.startTimeUnixNano ? 1 : 0;
  const rows: WaterfallRow[] = [];
  const visit = (span: ReceivedSpan, depth: number): void => {
    rows.push({ span, depth });
    for (const child of (children.get(span.spanId) ?? []).sort(byStart)) visit(child, depth + 1);
  };
  for (const root of roots.sort(byStart)) visit(root, 0);
  return rows;
}

const escapeXml = (text: string): string =>
  text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
const COLORS: Readonly<Record<string, string>> = { 'consumer-gateway': '#3b82f6', 'provider-gateway': '#10b981' };

export function renderWaterfall(spans: readonly ReceivedSpan[], title: string): string {
  const rows = waterfallRows(spans);
  if (rows.length === 0) throw new Error('no spans to draw');
  const t0 = rows.reduce(
    // biome-ignore lint/complexity/useMathMinMax: nanosecond times are bigints, which Math.min does not take
    (m, r) => (r.span.startTimeUnixNano < m ? r.span.startTimeUnixNano : m),
    rows[0]!.span.startTimeUnixNano,
  );
  const t1 = rows.reduce(
    // biome-ignore lint/complexity/useMathMinMax: bigints, as above
    (m, r) => (r.span.endTimeUnixNano > m ? r.span.endTimeUnixNano : m),
    rows[0]!.span.endTimeUnixNano,
  );
  const totalMs = Math.max(Number(t1 - t0) / 1e6, 0.001);
  const label = 430;
  const width = 1100;
  const bars = width - label - 20;
  const rowHeight = 26;
  const top = 48;
  const x = (ns: bigint): number => label + (Number(ns - t0) / 1e6 / totalMs) * bars;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${top + rows.length * rowHeight + 40}" font-family="ui-monospace, Menlo, monospace" font-size="12">`,
    `<rect width="100%" height="100%" fill="#ffffff"/>`,
    `<text x="10" y="20" font-size="14" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="10" y="38" fill="#555">trace ${escapeXml(rows[0]!.span.traceId)}, ${rows.length} spans, ${totalMs.toFixed(1)} ms</text>`,
  ];
  for (let tick = 0; tick <= 4; tick++) {
    const tx = label + (bars * tick) / 4;
    parts.push(`<line x1="${tx}" y1="${top - 4}" x2="${tx}" y2="${top + rows.length * rowHeight}" stroke="#e5e7eb"/>`);
    parts.push(
      `<text x="${tx}" y="${top + rows.length * rowHeight + 16}" text-anchor="middle" fill="#555">${((totalMs * tick) / 4).toFixed(1)} ms</text>`,
    );
  }
  rows.forEach(({ span, depth }, i) => {
    const y = top + i * rowHeight;
    const start = x(span.startTimeUnixNano);
    const end = Math.max(x(span.endTimeUnixNano), start + 2);
    const ms = Number(span.endTimeUnixNano - span.startTimeUnixNano) / 1e6;
    const color = COLORS[span.serviceName] ?? '#6b7280';
    parts.push(`<text x="${10 + depth * 14}" y="${y + 16}">${escapeXml(`${span.serviceName}: ${span.name}`)}</text>`);
    parts.push(
      `<rect x="${start.toFixed(1)}" y="${y + 5}" width="${(end - start).toFixed(1)}" height="15" rx="2" fill="${color}" opacity="${span.status.code === 2 ? 0.5 : 0.9}"/>`,
    );
    // The duration beside the label, right-aligned before the axis: never on top of a bar.
    parts.push(`<text x="${label - 10}" y="${y + 16}" text-anchor="end" fill="#111">${ms.toFixed(2)} ms</text>`);
    for (const event of span.events) {
      const ex = x(event.timeUnixNano);
      parts.push(
        `<line x1="${ex.toFixed(1)}" y1="${y + 2}" x2="${ex.toFixed(1)}" y2="${y + 23}" stroke="#dc2626" stroke-width="2"><title>${escapeXml(event.name)}</title></line>`,
      );
    }
    const ttft = span.attributes['gen_ai.server.time_to_first_token'];
    if (typeof ttft === 'number') {
      const tx = x(span.startTimeUnixNano + BigInt(Math.round(ttft * 1e9)));
      parts.push(
        `<line x1="${tx.toFixed(1)}" y1="${y + 2}" x2="${tx.toFixed(1)}" y2="${y + 23}" stroke="#dc2626" stroke-width="2" stroke-dasharray="3,2"><title>time to first token ${(ttft * 1000).toFixed(1)} ms</title></line>`,
      );
    }
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}
