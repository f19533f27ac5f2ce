// Metrics of the serving config and the site signals poller, registered on the gateway's registry. Label values are
// bounded: reasons and outcomes are fixed lists; sites come from the accepted serving config (at most 256).
import { Counter, Gauge, type Registry } from 'prom-client';

export interface ServingMetrics {
  /** The reference gateway's name for the same counter. */
  readonly reloads: Counter<'result' | 'reason'>;
  readonly acceptedRevision: Gauge<'revision'>;
  readonly polls: Counter<'site' | 'outcome'>;
  readonly sampleAge: Gauge<'site'>;
}

export function createServingMetrics(registry: Registry): ServingMetrics {
  const registers = [registry];
  return {
    reloads: new Counter({
      name: 'grid_serving_config_reload_total',
      help: 'Serving config loads by result (accepted, unchanged, rejected) and reason (a validation reason, unreadable, same_bytes, same_revision).',
      labelNames: ['result', 'reason'],
      registers,
    }),
    acceptedRevision: new Gauge({
      name: 'grid_serving_config_accepted_revision',
      help: 'The serving config revision in use (1 for the accepted one).',
      labelNames: ['revision'],
      registers,
    }),
    polls: new Counter({
      name: 'grid_site_signals_polls_total',
      help: "Polls of each site's mTLS signals endpoint by outcome: answered, no_address, failed (no answer, refused TLS, HTTP error) or invalid (a document that is not an answer for that site).",
      labelNames: ['site', 'outcome'],
      registers,
    }),
    sampleAge: new Gauge({
      name: 'grid_site_signals_sample_age_seconds',
      help: "Age of each site's newest signals sample on the gateway clock; a sample older than the staleness bound is not used.",
      labelNames: ['site'],
      registers,
    }),
  };
}
