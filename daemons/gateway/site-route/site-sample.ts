// One site's answer concluded into a SiteSample, pure (reference docs/site-selection.md "Inputs": "The gateway
// concludes in-flight as running plus waiting per endpoint, times ready endpoints, plus what flow control holds").
// A series no row carries stays undefined: a missing signal is neutral, never zero.
import type { PeerSignalRow } from '../../../schemas/generated/peer-signals.ts';
import type { SiteSample } from './site-view.ts';

/**
 * `providers`, when given, limits the rows to the providers this gateway's serving config names at that site (a
 * provider it cannot route to says nothing about room for its requests).
 */
export function concludeSite(
  site: string,
  rows: readonly PeerSignalRow[],
  atMs: number,
  providers?: ReadonlySet<string>,
): SiteSample {
  let inFlight: number | undefined;
  let waiting: number | undefined;
  let readyEndpoints: number | undefined;
  const add = (total: number | undefined, value: number) => (total ?? 0) + value;
  for (const row of rows) {
    if (providers !== undefined && !providers.has(row.provider)) continue;
    const {
      running_per_endpoint: running,
      waiting_per_endpoint: queued,
      flow_control_held: held,
      ready_endpoints: ready,
    } = row.signals;
    if (ready !== undefined) readyEndpoints = add(readyEndpoints, ready);
    // Per-endpoint averages mean nothing without the endpoint count they average over.
    if (ready !== undefined && running !== undefined)
      inFlight = add(inFlight, (running + (queued ?? 0)) * ready + (held ?? 0));
    if (ready !== undefined && queued !== undefined) waiting = add(waiting, queued * ready);
    if (held !== undefined) waiting = add(waiting, held);
  }
  return {
    site,
    atMs,
    ...(inFlight !== undefined ? { inFlight } : {}),
    ...(waiting !== undefined ? { waiting } : {}),
    ...(readyEndpoints !== undefined ? { readyEndpoints } : {}),
  };
}
