// Every duration the operator reads goes through schemas/durations.ts: each CRD field's rule takes exactly what its
// schema pattern admits (plus the field's own range), and each caller's error names its field or flag and range.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../daemons/gossip-operator/config.ts';
import { REFRESH_INTERVAL_RULE, refreshIntervalMs } from '../../daemons/gossip-operator/controllers/grid-network.ts';
import { INVITE_LIFETIME_RULE, inviteLifetime } from '../../daemons/gossip-operator/controllers/site-invite.ts';
import { TerminalError } from '../../daemons/gossip-operator/manager/manager.ts';
import { PRESSURE_DURATION_RULE, resolveRoutingPolicy } from '../../daemons/routing/policy.ts';
import {
  applySwimSpec,
  SWIM_PROBE_INTERVAL_RULE,
  SWIM_SUSPICION_TIMEOUT_RULE,
  SwimConfigError,
  wanProfile,
} from '../../daemons/gossip-operator/swim/config.ts';
import type { GridNetworkSpec } from '../../schemas/generated/gridnetworks.ts';
import { checkDuration, type DurationRule, parseDuration } from '../../schemas/durations.ts';

function crdPattern(file: string, path: readonly string[]): RegExp {
  let node = JSON.parse(readFileSync(new URL(`../../schemas/crds/${file}`, import.meta.url), 'utf8')) as Record<
    string,
    unknown
  >;
  for (const key of ['properties', 'spec', ...path.flatMap((p) => ['properties', p])])
    node = node[key] as Record<string, unknown>;
  return new RegExp(node['pattern'] as string, 'u');
}

const COUNTS = [
  '0',
  '1',
  '05',
  '9',
  '59',
  '60',
  '99',
  '100',
  '168',
  '169',
  '299',
  '300',
  '999',
  '1000',
  '1001',
  '1500',
  '10080',
  '10081',
  '604800',
  '604801',
  '999999',
  '1000000',
  '9223372036',
  '9223372037',
  '99999999',
];
const CORPUS = [
  ...COUNTS.flatMap((n) => ['', 'ms', 's', 'm', 'h', 'us', 'd'].map((u) => n + u)),
  '',
  ' 5s',
  '-5s',
  '1h30m',
  '1.5s',
  'NaN',
];

describe('each CRD duration field takes exactly what the API server admits', () => {
  const withinGoRange = (text: string) => parseDuration(text).ok;
  it.each([
    [
      'spec.swim.probeInterval',
      'gridnetworks.schema.json',
      ['swim', 'probeInterval'],
      SWIM_PROBE_INTERVAL_RULE,
      withinGoRange,
    ],
    [
      'spec.swim.suspicionTimeout',
      'gridnetworks.schema.json',
      ['swim', 'suspicionTimeout'],
      SWIM_SUSPICION_TIMEOUT_RULE,
      withinGoRange,
    ],
    [
      'spec.metricsRefreshInterval',
      'gridnetworks.schema.json',
      ['metricsRefreshInterval'],
      REFRESH_INTERVAL_RULE,
      withinGoRange,
    ],
    [
      'pressure.minimumStateDuration',
      'gridnetworks.schema.json',
      ['admissionPolicy', 'pressure', 'minimumStateDuration'],
      PRESSURE_DURATION_RULE,
      withinGoRange,
    ],
    [
      'pressure.recoveryHoldDown',
      'gridnetworks.schema.json',
      ['admissionPolicy', 'pressure', 'recoveryHoldDown'],
      PRESSURE_DURATION_RULE,
      withinGoRange,
    ],
    // The API narrows the pattern's six digits to 5m through 168h (docs/contract.md §1); the operator enforces that
    // range.
    [
      'SiteInvite spec.lifetime',
      'siteinvites.schema.json',
      ['lifetime'],
      INVITE_LIFETIME_RULE,
      (t: string) => {
        const parsed = parseDuration(t);
        return parsed.ok && parsed.ms >= 300_000 && parsed.ms <= 604_800_000;
      },
    ],
  ] as const)('%s', (_field, file, path, rule: DurationRule, inRange: (text: string) => boolean) => {
    const pattern = crdPattern(file, path);
    for (const text of CORPUS) {
      expect(checkDuration('f', text, rule).ok, `${JSON.stringify(text)} vs ${pattern.source}`).toBe(
        pattern.test(text) && inRange(text),
      );
    }
  });
});

describe('each caller names its field and the accepted range', () => {
  it('GridNetwork spec.swim', () => {
    expect(() => applySwimSpec('a', wanProfile(), { probeInterval: '900ms' })).toThrow(SwimConfigError);
    expect(() => applySwimSpec('a', wanProfile(), { probeInterval: '900ms' })).toThrow(
      'spec.swim.probeInterval: "900ms" is below 1s; use whole seconds (s) or milliseconds (ms) from 1s, such as 5s',
    );
    expect(() => applySwimSpec('a', wanProfile(), { suspicionTimeout: '2m' })).toThrow(
      'spec.swim.suspicionTimeout: "2m" is in m, which is not accepted here',
    );
    expect(applySwimSpec('a', wanProfile(), { probeInterval: '1000ms', suspicionTimeout: '1s' })).toMatchObject({
      probeIntervalMs: 1_000,
      suspicionTimeoutMs: 1_000,
    });
  });

  it('GridNetwork spec.metricsRefreshInterval', () => {
    expect(refreshIntervalMs('1000ms', false)).toBe(1_000);
    expect(refreshIntervalMs('1s', false)).toBe(1_000);
    for (const [text, fault] of [
      ['999ms', '"999ms" is below 1s'],
      ['1.5s', '"1.5s" has a fraction'],
      ['99999999999s', '"99999999999s" overflows'],
    ] as const) {
      expect(() => refreshIntervalMs(text, false)).toThrow(TerminalError);
      expect(() => refreshIntervalMs(text, false)).toThrow(`spec.metricsRefreshInterval: ${fault}`);
    }
    expect(() => refreshIntervalMs('5', false)).toThrow(
      'spec.metricsRefreshInterval: "5" has no unit; use whole seconds (s) or milliseconds (ms) from 1s, such as 10s',
    );
  });

  it('GridNetwork spec.admissionPolicy.pressure durations', () => {
    const resolve = (pressure: Record<string, unknown>) =>
      resolveRoutingPolicy('production', {
        admissionPolicy: { mode: 'stabilized', pressure },
      } as unknown as GridNetworkSpec);
    const good = resolve({ minimumStateDuration: '1s', recoveryHoldDown: '3600s' });
    expect(good.ok && good.value.admission).toMatchObject({
      minimumStateDurationSeconds: 1,
      recoveryHoldDownSeconds: 3_600,
    });
    const bad = resolve({ recoveryHoldDown: '1m' });
    expect(bad.ok).toBe(false);
    if (!bad.ok) {
      expect(bad.error.message).toBe(
        'GridNetwork production: spec.admissionPolicy.pressure.recoveryHoldDown: "1m" is in m, which is not accepted here; use whole seconds (s) from 1s, such as 10s',
      );
    }
    const notText = resolve({ minimumStateDuration: 10 });
    if (!notText.ok)
      expect(notText.error.message).toContain('spec.admissionPolicy.pressure.minimumStateDuration: 10 is not a string');
    expect(notText.ok).toBe(false);
  });

  it('SiteInvite spec.lifetime: default 24h, 5m through 168h', () => {
    expect(inviteLifetime(undefined)).toEqual({ ok: true, ms: 86_400_000 });
    expect(inviteLifetime('300s')).toEqual({ ok: true, ms: 300_000 });
    expect(inviteLifetime('10080m')).toEqual({ ok: true, ms: 604_800_000 });
    const low = inviteLifetime('4m');
    expect(low.ok).toBe(false);
    if (!low.ok)
      expect(low.message).toBe(
        'spec.lifetime: "4m" is below 5m; use whole seconds (s), minutes (m) or hours (h) from 5m through 168h, such as 24h',
      );
    const high = inviteLifetime('169h');
    if (!high.ok) expect(high.message).toContain('spec.lifetime: "169h" is above 168h');
    expect(high.ok).toBe(false);
  });

  describe('daemon flags and their environment variables', () => {
    // ConfigError, with exactly this message.
    const refuses = (argv: string[], env: NodeJS.ProcessEnv, message: string): void => {
      expect(() => parseConfig(['--site', 'a', ...argv], env)).toThrow(ConfigError);
      expect(() => parseConfig(['--site', 'a', ...argv], env)).toThrow(new ConfigError(message));
    };

    it.each([
      ['1ms', 1],
      ['15s', 15_000],
      ['5m', 300_000],
      ['2h', 7_200_000],
    ])('--lease-duration %s', (text, ms) => {
      expect(parseConfig(['--site', 'a', '--lease-duration', text], {}).leaseDurationMs).toBe(ms);
      expect(parseConfig(['--site', 'a'], { GRID_LEASE_DURATION: text }).leaseDurationMs).toBe(ms);
      // Flag and variable values are trimmed before any parsing.
      expect(parseConfig(['--site', 'a'], { GRID_LEASE_DURATION: ` ${text}\n` }).leaseDurationMs).toBe(ms);
    });

    it.each([
      ['0s', 'is zero'],
      ['-1s', 'is negative'],
      ['30', 'has no unit'],
      ['1d', 'has the unknown unit "d"'],
      ['1h30m', 'combines units'],
      ['0.5h', 'has a fraction'],
      ['99999999h', 'overflows the largest duration (2562047h47m16.854s)'],
      ['NaN', 'is not a duration'],
      ['5 minutes', 'contains whitespace'],
    ])('refuses %j naming the flag and its variable', (text, reason) => {
      const accepts = 'use whole milliseconds (ms), seconds (s), minutes (m) or hours (h) from 1ms, such as 30s';
      refuses(
        [`--peer-poll-interval=${text}`],
        {},
        `--peer-poll-interval (env GRID_PEER_POLL_INTERVAL): ${JSON.stringify(text)} ${reason}; ${accepts}`,
      );
      refuses(
        [],
        { GRID_MODEL_DISCOVERY_TTL: text },
        `--model-discovery-ttl (env GRID_MODEL_DISCOVERY_TTL): ${JSON.stringify(text)} ${reason}; ${accepts}`,
      );
    });

    it('--enrollment-cert-lifetime: m or h, 1h through 8760h', () => {
      const on = [
        '--enrollment-address',
        ':9443',
        '--enrollment-tls-cert',
        'a',
        '--enrollment-tls-key',
        'a',
        '--grid-ca-cert',
        'c',
        '--grid-ca-key',
        'c',
      ];
      expect(
        parseConfig(['--site', 'a', ...on, '--enrollment-cert-lifetime', '60m'], {}).enrollment?.certificateLifetimeMs,
      ).toBe(3_600_000);
      expect(
        parseConfig(['--site', 'a', ...on, '--enrollment-cert-lifetime', '8760h'], {}).enrollment
          ?.certificateLifetimeMs,
      ).toBe(31_536_000_000);
      const range = 'use whole minutes (m) or hours (h) from 1h through 8760h, such as 2160h';
      for (const [text, fault] of [
        ['59m', '"59m" is below 1h'],
        ['8761h', '"8761h" is above 8760h'],
        ['3600s', '"3600s" is in s, which is not accepted here'],
        ['1y', '"1y" has the unknown unit "y"'],
      ] as const) {
        refuses(
          [...on, '--enrollment-cert-lifetime', text],
          {},
          `--enrollment-cert-lifetime (env GRID_ENROLLMENT_CERT_LIFETIME): ${fault}; ${range}`,
        );
      }
    });
  });
});
