/**
 * The operator's Prometheus metrics, under the names docs/contract.md gives them. One registry per operator instance
 * (tests run several in one process). Label values are fixed catalogues or resource names, never secret bytes.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import { collectProcessMetrics, registerEventLoopDelay } from '../shared/runtime-metrics.ts';
import { UNHONOURED_FEATURES, type UnhonouredFeature } from '../../schemas/overlay/dialect.ts';
import { GRID_SITE_PHASES, type GridSitePhase } from './site-phase.ts';

export class OperatorMetrics {
  readonly registry = new Registry();
  readonly providerScrapes: Counter<'grid_provider' | 'result'>;
  readonly providerLastScrapeSuccess: Gauge<'grid_provider'>;
  readonly providerReady: Gauge<'grid_site' | 'grid_provider'>;
  readonly sitePhase: Gauge<'site' | 'phase'>;
  readonly sitePhaseTransitions: Counter<'phase' | 'reason'>;
  readonly modelDiscovery: Counter<'provider' | 'outcome'>;
  readonly mcpProbes: Counter<'provider' | 'outcome'>;
  readonly a2aProbes: Counter<'provider' | 'outcome'>;
  readonly gossipDrops: Counter<'component' | 'reason'>;
  readonly overlayRenders: Counter<'outcome'>;
  readonly overlayApplies: Counter<'outcome'>;
  readonly servingApplies: Counter<'outcome'>;
  readonly servingDeletes: Counter<'outcome'>;
  readonly overlayUnhonoured: Gauge<'network' | 'gateway' | 'feature'>;
  readonly reconciles: Counter<'controller' | 'result'>;
  readonly leader: Gauge;
  readonly swimMembers: Gauge<'state'>;
  readonly peerSignalsRefused: Counter<'peer' | 'reason'>;
  readonly peerSignalPolls: Counter<'peer' | 'outcome'>;
  readonly gatewayAgeReports: Counter<'outcome'>;
  readonly gatewaySpendReports: Counter<'outcome'>;
  readonly gatewayIngestRefused: Counter<'reason'>;
  readonly enrollmentRedeems: Counter<'outcome'>;
  readonly fileReloads: Counter<'file_kind' | 'outcome'>;

  constructor(options: { defaultMetrics?: boolean } = {}) {
    const registers = [this.registry];
    if (options.defaultMetrics === true) {
      collectProcessMetrics(this.registry);
      registerEventLoopDelay(this.registry);
    }
    this.providerScrapes = new Counter({
      name: 'grid_provider_scrape_total',
      help: 'InferenceProvider metrics scrapes by result: success, no_series, or a failure class.',
      labelNames: ['grid_provider', 'result'],
      registers,
    });
    this.providerLastScrapeSuccess = new Gauge({
      name: 'grid_provider_last_scrape_success_timestamp_seconds',
      help: 'Unix time of the last scrape of the provider that returned its configured series.',
      labelNames: ['grid_provider'],
      registers,
    });
    this.providerReady = new Gauge({
      name: 'grid_provider_ready',
      help: "1 when the provider can serve, 0 when not (Unavailable, Ready False, metrics healthy=false, or no routing category); this site's providers and those its peers publish.",
      labelNames: ['grid_site', 'grid_provider'],
      registers,
    });
    this.sitePhase = new Gauge({
      name: 'grid_site_phase',
      help: 'GridSite phase as a state set: 1 for the current phase, 0 for the other five.',
      labelNames: ['site', 'phase'],
      registers,
    });
    this.sitePhaseTransitions = new Counter({
      name: 'grid_site_phase_transition_total',
      help: 'GridSite phase transitions by the phase entered and its reason.',
      labelNames: ['phase', 'reason'],
      registers,
    });
    this.modelDiscovery = new Counter({
      name: 'grid_model_discovery_total',
      help: 'Model discovery polls by outcome: ok, credential, tls, config, unreachable, timeout, http_status, invalid_response.',
      labelNames: ['provider', 'outcome'],
      registers,
    });
    this.mcpProbes = new Counter({
      name: 'grid_mcp_probe_total',
      help: 'AgentToolProvider MCP tools/list probes by outcome (SitesMatched, AwaitingSiteMatch or a reason code).',
      labelNames: ['provider', 'outcome'],
      registers,
    });
    this.a2aProbes = new Counter({
      name: 'grid_a2a_probe_total',
      help: 'AgentToAgentProvider agent card probes by outcome (SitesMatched, AwaitingSiteMatch or a reason code).',
      labelNames: ['provider', 'outcome'],
      registers,
    });
    this.gossipDrops = new Counter({
      name: 'grid_gossip_dropped_total',
      help: 'Gossip packets, messages and state records dropped, by component (swim, gossip-state) and reason.',
      labelNames: ['component', 'reason'],
      registers,
    });
    this.overlayRenders = new Counter({
      name: 'grid_overlay_renders_total',
      help: 'Overlay renders by outcome: rendered or a render error code.',
      labelNames: ['outcome'],
      registers,
    });
    this.overlayApplies = new Counter({
      name: 'grid_overlay_applies_total',
      help: "Overlay ConfigMap applies by outcome: applied, unchanged (revision already distributed), consumer_would_reject (the consumer's dialect would refuse it; last revision kept) or failed.",
      labelNames: ['outcome'],
      registers,
    });
    this.servingApplies = new Counter({
      name: 'grid_serving_config_applies_total',
      help: 'Serving config ConfigMap applies (gateways with gridServing) by outcome: applied, unchanged (revision already distributed), not_rendered (the overlay did not render), consumer_would_reject or failed (last revision kept in each).',
      labelNames: ['outcome'],
      registers,
    });
    this.servingDeletes = new Counter({
      name: 'grid_serving_config_deletes_total',
      help: "Serving config ConfigMaps of gateways no longer served (gridServing off, gateway removed) by outcome: deleted, foreign (not carrying the operator's serving labels for that gateway: left in place) or failed (retried next reconcile).",
      labelNames: ['outcome'],
      registers,
    });
    this.overlayUnhonoured = new Gauge({
      name: 'grid_overlay_unhonoured_features',
      help: 'Selection policy features a consumer gateway will not honour, as a state set per gateway (namespace/name): 1 for each feature of schemas/overlay/dialect.ts UNHONOURED_FEATURES its dialect drops, else 0.',
      labelNames: ['network', 'gateway', 'feature'],
      registers,
    });
    this.reconciles = new Counter({
      name: 'grid_operator_reconcile_total',
      help: 'Reconciles by controller and result (success, error, terminal).',
      labelNames: ['controller', 'result'],
      registers,
    });
    this.leader = new Gauge({ name: 'grid_operator_leader', help: '1 while this replica holds the Lease.', registers });
    this.swimMembers = new Gauge({
      name: 'grid_swim_members',
      help: 'SWIM members by state.',
      labelNames: ['state'],
      registers,
    });
    this.peerSignalsRefused = new Counter({
      name: 'grid_peer_signals_refused_total',
      help: 'Polled peer signal rows refused and dropped, by peer site and reason: skew (negative or implausible age) or invalid.',
      labelNames: ['peer', 'reason'],
      registers,
    });
    this.peerSignalPolls = new Counter({
      name: 'grid_peer_signal_polls_total',
      help: 'Peer signal polls by peer site and outcome: answered, no_answer, invalid (unusable document) or no_address.',
      labelNames: ['peer', 'outcome'],
      registers,
    });
    this.gatewayAgeReports = new Counter({
      name: 'grid_gateway_age_reports_total',
      help: 'Gateway age reports received, by outcome: recorded, duplicate, invalid, skew_count_decreased, capacity, no_network, too_large, busy (queue full, answered 503).',
      labelNames: ['outcome'],
      registers,
    });
    this.gatewaySpendReports = new Counter({
      name: 'grid_gateway_spend_reports_total',
      help: 'Gateway spend reports answered, by outcome: recorded, final_recorded, reinstated, duplicate, spend_decreased, epoch_retired (tenant-spend/ledger.ts), invalid, no_network.',
      labelNames: ['outcome'],
      registers,
    });
    this.gatewayIngestRefused = new Counter({
      name: 'grid_gateway_ingest_refused_total',
      help: 'Gateway ingest requests refused 401 before their body was read, by reason: missing (no bearer token), wrong (not the ingest token), no_token (the token file could not be read yet).',
      labelNames: ['reason'],
      registers,
    });
    this.enrollmentRedeems = new Counter({
      name: 'grid_enrollment_redeem_total',
      help: 'SiteInvite redeem attempts by outcome: issued or a refusal code (enrollment/redeem.ts REDEEM_OUTCOMES).',
      labelNames: ['outcome'],
      registers,
    });
    this.fileReloads = new Counter({
      name: 'grid_operator_file_reloads_total',
      help: 'Loads of mounted files (enrollment_tls: the enrollment certificate and the grid CA) that took new material (accepted) or kept the previous because a file was unreadable or invalid (rejected).',
      labelNames: ['file_kind', 'outcome'],
      registers,
    });
  }

  setSitePhase(site: string, phase: GridSitePhase): void {
    for (const p of GRID_SITE_PHASES) this.sitePhase.set({ site, phase: p }, p === phase ? 1 : 0);
  }

  setUnhonoured(network: string, gateway: string, features: readonly UnhonouredFeature[]): void {
    for (const feature of UNHONOURED_FEATURES)
      this.overlayUnhonoured.set({ network, gateway, feature }, features.includes(feature) ? 1 : 0);
  }

  dropUnhonoured(network: string, gateway: string): void {
    for (const feature of UNHONOURED_FEATURES) this.overlayUnhonoured.remove({ network, gateway, feature });
  }

  dropSite(site: string): void {
    for (const p of GRID_SITE_PHASES) this.sitePhase.remove({ site, phase: p });
  }
}
