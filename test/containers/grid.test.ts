// Every workload of dist/ as compiled, run from the project image under podman against one real kube-apiserver +
// etcd per site (container-grid.ts says how the pods are wired and the Secrets made, as docs/deploy.md
// tells a user). Shows dist/ held by the API servers exactly as compiled, each site reached only through its
// LoadBalancer addresses, each site verifying the other's pinned gateway (GridSite Active), the two sites' operators forming a grid,
// overlay-sync writing the overlay into the consumer gateway's shared volume, a chat completion through the
// containerized consumer gateway -> provider gateway (mTLS) -> sim, graceful stops (timed, exit 0, no accepted
// request failed under load), serving on after one container of each kind is stopped, and bad flags refused.
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inviteTokenSecretName } from '../../schemas/object-names.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CONTAINER_FIELD_MANAGER,
  ContainerGrid,
  EXAMPLE_PKI,
  httpGet,
  runAgn,
  type RunningContainer,
  waitUntil,
} from './container-grid.ts';
import { podman } from './podman.ts';

const grid = new ContainerGrid(join(tmpdir(), `agn-containers-${process.pid}`), (line) =>
  console.log(`[containers] ${line}`),
);
const stops: { container: string; ms: number; exitCode: number }[] = [];

beforeAll(async () => {
  const started = Date.now();
  try {
    await grid.start();
  } catch (error) {
    console.log(`[containers] start failed; what the containers and API servers said:\n${await grid.diagnostics()}`);
    await grid.stop();
    throw error;
  }
  console.log(
    `[containers] ${grid.containers.length} containers in ${grid.pods.length} pods started and ready in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
});

afterAll(async () => {
  if (stops.length > 0)
    console.log(
      `[containers] podman stop times: ${stops.map((s) => `${s.container} ${Math.round(s.ms)} ms exit ${s.exitCode}`).join('; ')}`,
    );
  await grid.stop();
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One chat completion on a fresh connection (so "accepted" means this request's own connection was accepted). */
function chat(host: string, port: number, model: string): Promise<Reply> {
  const body = JSON.stringify({ model, messages: [{ role: 'user', content: 'hello from a container test' }] });
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host,
        port,
        method: 'POST',
        path: '/v1/chat/completions',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(grid.demoKeys[0] === undefined ? {} : { authorization: `Bearer ${grid.demoKeys[0].key}` }),
        },
        timeout: 15_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The --name a sim container was compiled with (its provider name, which it reports as x-sim-provider). */
function simName(container: RunningContainer): string {
  const argv = [...(container.template.command ?? []), ...(container.template.args ?? [])];
  return argv[argv.indexOf('--name') + 1] ?? '';
}

function consumerAddress(container: RunningContainer): { host: string; port: number } {
  const port =
    container.template.ports?.find((p) => p.name === 'listener')?.containerPort ??
    container.template.ports?.[0]?.containerPort;
  if (port === undefined) throw new Error(`${container.name} declares no listener port`);
  return { host: container.pod.ip, port };
}

async function inspect(name: string): Promise<{
  Path: string;
  Args: string[];
  Config: { User: string };
  HostConfig: { ReadonlyRootfs: boolean; CapDrop: string[] };
  ImageName: string;
  State: { Running: boolean };
}> {
  const result = await podman(['inspect', name]);
  return (JSON.parse(result.stdout) as never[])[0] as never;
}

describe('the compiled grid from the project image', () => {
  it('runs every container of every Deployment replica with its compiled command, args, user and read-only root', async () => {
    const deployments = grid.sites.flatMap((s) =>
      s.compiled.objects.filter((o) => o.kind === 'Deployment').map((o) => ({ site: s.site, o })),
    );
    const expected = deployments.reduce((n, { o }) => {
      const spec = o['spec'] as { replicas?: number; template: { spec: { containers: unknown[] } } };
      return n + (spec.replicas ?? 1) * spec.template.spec.containers.length;
    }, 0);
    const running = grid.containers.filter((c) => !c.init);
    expect(running).toHaveLength(expected);
    for (const container of running) {
      const info = await inspect(container.name);
      expect(info.State.Running, container.name).toBe(true);
      expect(info.ImageName, container.name).toBe(container.template.image);
      // The process podman started: the compiled command and args, as PID 1, no shell in between.
      expect([info.Path, ...info.Args], container.name).toEqual([
        ...(container.template.command ?? []),
        ...(container.template.args ?? []),
      ]);
      expect(info.Config.User, container.name).toBe('10001:10001');
      expect(info.HostConfig.ReadonlyRootfs, container.name).toBe(true);
    }
    const roles = new Set(running.map((c) => c.role));
    expect([...roles].sort()).toEqual([
      'consumer-gateway',
      'gossip-operator',
      'overlay-sync',
      'provider-gateway',
      'sim',
    ]);
  });

  it('runs dist/ exactly as compiled: the API servers hold each GridSite as dist/ says, pins included, changed by no one but the apply', async () => {
    for (const cluster of grid.sites) {
      for (const compiled of cluster.compiled.objects.filter((o) => o.kind === 'GridSite')) {
        const res = await cluster.client.request(
          'GET',
          `/apis/grid.praxis.fast/v1alpha1/gridsites/${compiled.metadata.name}`,
        );
        const stored = res.body as {
          spec: unknown;
          metadata: { managedFields?: { manager: string; subresource?: string }[] };
        };
        expect(stored.spec, `${cluster.site}: GridSite ${compiled.metadata.name}`).toEqual(compiled['spec']);
        // Only the apply of dist/ wrote the spec; the operator writes status only.
        const specWriters = (stored.metadata.managedFields ?? [])
          .filter((f) => f.subresource !== 'status')
          .map((f) => f.manager);
        expect(specWriters, `${cluster.site}: GridSite ${compiled.metadata.name}`).toEqual([CONTAINER_FIELD_MANAGER]);
      }
      const peers = cluster.compiled.objects.filter((o) => o.kind === 'GridSite' && o.metadata.name !== cluster.site);
      expect(peers.length, cluster.site).toBe(1);
      for (const peer of peers)
        expect(
          (peer['spec'] as { trust?: { canonicalFingerprints?: string[] } }).trust?.canonicalFingerprints?.length,
          `${cluster.site}: ${peer.metadata.name} is pinned in dist/`,
        ).toBe(1);
    }
  });

  it('gives each site a LoadBalancer address for its operator and provider gateway, and nothing of a site by ClusterIP to the other', async () => {
    for (const cluster of grid.sites) {
      for (const name of ['gossip-operator-public', 'provider-gateway']) {
        const res = await cluster.client.request('GET', `/api/v1/namespaces/grid-system/services/${name}`);
        const service = res.body as {
          spec: { type: string };
          status?: { loadBalancer?: { ingress?: { ip: string }[] } };
        };
        expect(service.spec.type, `${cluster.site}/${name}`).toBe('LoadBalancer');
        expect(service.status?.loadBalancer?.ingress?.[0]?.ip, `${cluster.site}/${name}`).toBe(
          grid.loadBalancerIp(cluster.site, 'grid-system', name),
        );
      }
    }
    const [east] = grid.byRole('gossip-operator', 'east');
    if (east === undefined) throw new Error('no east operator');
    const hosts = (await podman(['pod', 'inspect', east.pod.podName, '--format', '{{json .InfraConfig.HostAdd}}']))
      .stdout;
    expect(hosts).toMatch(/gossip\.west\.grid\.example\.com/u);
    expect(hosts).not.toMatch(
      new RegExp(grid.serviceIp('west', 'grid-system', 'gossip-operator').replaceAll('.', '\\.'), 'u'),
    );
  });

  it('has each site verify the other: both peer GridSites Active with the pinned certificate, Ready', async () => {
    for (const cluster of grid.sites) {
      const peer = cluster.compiled.objects.find((o) => o.kind === 'GridSite' && o.metadata.name !== cluster.site);
      if (peer === undefined) throw new Error(`${cluster.site}: no peer GridSite`);
      const status = await waitUntil(
        `${cluster.site}: GridSite ${peer.metadata.name} Active`,
        async () => {
          const res = await cluster.client.request(
            'GET',
            `/apis/grid.praxis.fast/v1alpha1/gridsites/${peer.metadata.name}`,
          );
          const s = (
            res.body as {
              status?: { phase?: string; reason?: string; conditions?: { type: string; status: string }[] };
            }
          ).status;
          return s?.phase === 'Active' ? s : undefined;
        },
        90_000,
      ).catch(async (error: unknown) => {
        const [operator] = grid.byRole('gossip-operator', cluster.site);
        throw new Error(`${(error as Error).message}\n${operator === undefined ? '' : await grid.logs(operator, 40)}`);
      });
      expect(status.reason).toBe('TlsVerified');
      expect(status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    }
  });

  it("redeems the SiteInvite east signs at east's public address with agn site enroll: enrollment as compiled", async () => {
    const east = grid.sites.find((s) => s.site === 'east');
    if (east === undefined) throw new Error('no east site');
    const tokenId = await waitUntil(
      'the north invite to get a token',
      async () => {
        const res = await east.client.request('GET', '/apis/grid.praxis.fast/v1alpha1/siteinvites/north');
        return (res.body as { status?: { tokenId?: string } }).status?.tokenId;
      },
      60_000,
    );
    const secret = await east.client.request(
      'GET',
      `/api/v1/namespaces/grid-system/secrets/${inviteTokenSecretName('north')}`,
    );
    const out = mkdtempSync(join(tmpdir(), 'agn-enroll-'));
    try {
      writeFileSync(
        join(out, 'north.token'),
        Buffer.from((secret.body as { data: { token: string } }).data.token, 'base64'),
      );
      const address = grid.loadBalancerIp('east', 'grid-system', 'gossip-operator-public');
      const enroll = await runAgn(
        [
          'site',
          'enroll',
          '--url',
          `https://${address}:9443`,
          '--ca',
          join(EXAMPLE_PKI, 'ca.crt'),
          '--token-id',
          tokenId,
          '--token-file',
          join(out, 'north.token'),
          '--site',
          'north',
          '--signer',
          'east',
          '--out',
          join(out, 'tls'),
        ],
        60_000,
      );
      expect(enroll.status, enroll.stderr).toBe(0);
      const issued = new X509Certificate(readFileSync(join(out, 'tls', 'tls.crt')));
      expect(issued.subject.split('\n')).toContain('CN=north');
      expect(issued.verify(new X509Certificate(readFileSync(join(EXAMPLE_PKI, 'ca.crt'))).publicKey)).toBe(true);
      const invite = await east.client.request('GET', '/apis/grid.praxis.fast/v1alpha1/siteinvites/north');
      expect((invite.body as { status?: { redeemed?: boolean; redeemedBy?: string } }).status).toMatchObject({
        redeemed: true,
        redeemedBy: 'north',
      });
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('has the operators of the two sites form one grid over gossip', async () => {
    const operators = grid.byRole('gossip-operator');
    expect(operators.map((o) => o.site).sort()).toEqual(['east', 'west']);
    for (const operator of operators) {
      // A timeout carries the operator's last log lines: what it was doing instead of answering.
      const status = await waitUntil(
        `${operator.name} to see both sites alive`,
        async () => {
          const body = JSON.parse((await httpGet(`http://${operator.pod.ip}:9090/status`)).body) as {
            gossip: { members: Record<string, number> } | null;
          };
          return body.gossip !== null && body.gossip.members['alive'] === 2 ? body : undefined;
        },
        60_000,
      ).catch(async (error: unknown) => {
        throw new Error(`${(error as Error).message}\n${await grid.logs(operator, 40)}`);
      });
      expect(status.gossip?.members).toMatchObject({ alive: 2, dead: 0 });
    }
  });

  it("has overlay-sync write the overlay into the consumer gateway pod's shared volume, with candidates of both sites", async () => {
    for (const gateway of grid.byRole('consumer-gateway')) {
      const mount = gateway.template.volumeMounts?.find((m) => m.mountPath === '/run/praxis-routing');
      expect(mount, gateway.name).toBeDefined();
      const overlay = await waitUntil(
        `${gateway.name}'s overlay to list both sites`,
        async () => {
          const parsed = JSON.parse(grid.readFileIn(gateway.pod, mount?.name ?? '', 'routing-overlay.json')) as {
            scope: { local_site: string };
            overlay: { candidates: { site?: string }[] };
          };
          expect(parsed.scope.local_site).toBe('east');
          const candidates = parsed.overlay.candidates;
          const sites = new Set(candidates.map((c) => c.site));
          return sites.has('east') && sites.has('west') ? candidates : undefined;
        },
        90_000,
      );
      expect(overlay.length).toBeGreaterThanOrEqual(3);
    }
  });

  it('serves a chat completion through every consumer gateway: -> provider gateway over mTLS -> sim, attributed', async () => {
    const sims = new Set(grid.byRole('sim').map(simName));
    for (const gateway of grid.byRole('consumer-gateway')) {
      const { host, port } = consumerAddress(gateway);
      const reply = await waitUntil(
        `a 200 from ${gateway.name}`,
        async () => {
          const r = await chat(host, port, 'sim-model-v1');
          return r.status === 200 ? r : undefined;
        },
        60_000,
      );
      expect(sims.has(String(reply.headers['x-sim-provider'])), String(reply.headers['x-sim-provider'])).toBe(true);
      expect(
        (JSON.parse(reply.body) as { choices: { message: { content: string } }[] }).choices[0]?.message.content,
      ).toContain('tok');
    }
  });
});

type Outcome = 'ok' | 'refused' | 'failed';

/** Closed-loop load on one gateway until `until` resolves: each request on its own connection, outcome counted. */
async function loadUntil(
  host: string,
  port: number,
  until: Promise<unknown>,
  clients: number,
): Promise<{ counts: Record<Outcome, number>; failures: string[] }> {
  const counts: Record<Outcome, number> = { ok: 0, refused: 0, failed: 0 };
  const failures: string[] = [];
  let done = false;
  void until.finally(() => (done = true));
  const loop = async (): Promise<void> => {
    while (!done) {
      try {
        const reply = await chat(host, port, 'sim-model-v1');
        if (reply.status === 200) counts.ok++;
        else {
          counts.failed++;
          failures.push(`HTTP ${reply.status}: ${reply.body.slice(0, 120)}`);
        }
      } catch (error) {
        // Refused: the listener was already closed, so the request was never accepted. Anything else (a reset or
        // hang-up after the connection was accepted) is a request the gateway dropped.
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ECONNREFUSED') {
          counts.refused++;
          await new Promise((r) => setTimeout(r, 20));
        } else {
          counts.failed++;
          failures.push(`${code ?? ''} ${(error as Error).message}`);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: clients }, loop));
  return { counts, failures };
}

async function stopTimed(container: RunningContainer): Promise<void> {
  const result = await grid.stopContainer(container);
  stops.push({ container: container.name, ...result });
  // A slow or failed stop says why: the daemon's last log lines (its shutdown steps) go into the failure message.
  const why = result.exitCode === 0 && result.ms < 3000 ? '' : `\n${await grid.logs(container, 40)}`;
  expect(result.exitCode, `${container.name} exit code${why}`).toBe(0);
  expect(result.ms, `${container.name} podman stop time${why}`).toBeLessThan(3000);
}

/** `count` chat completions in a row through `gateway`, all 200; returns who answered. */
async function serves(gateway: RunningContainer, count: number, timeoutMs: number): Promise<string[]> {
  const { host, port } = consumerAddress(gateway);
  return waitUntil(
    `${count} successes in a row from ${gateway.name}`,
    async () => {
      const answered: string[] = [];
      for (let i = 0; i < count; i++) {
        const reply = await chat(host, port, 'sim-model-v1');
        if (reply.status !== 200) return undefined;
        answered.push(String(reply.headers['x-sim-provider']));
      }
      return answered;
    },
    timeoutMs,
  );
}

describe('graceful stop and serving on', () => {
  it('stops a consumer gateway replica under load through its Service within 3 s, exit 0, failing no request', async () => {
    const [target] = grid.byRole('consumer-gateway');
    if (target === undefined) throw new Error('no consumer gateway');
    const port = consumerAddress(target).port;
    const service = grid.serviceIp(target.site, target.pod.plan.namespace, target.pod.plan.deployment);
    let stopped!: () => void;
    const stopDone = new Promise<void>((resolve) => (stopped = resolve));
    const load = loadUntil(service, port, stopDone, 6);
    await new Promise((r) => setTimeout(r, 1500));
    await stopTimed(target).finally(() => setTimeout(stopped, 1000));
    const { counts, failures } = await load;
    console.log(
      `[containers] load through Service ${service}:${port} while ${target.name} stopped: ${JSON.stringify(counts)}`,
    );
    expect(failures).toEqual([]);
    expect(counts.refused).toBe(0);
    expect(counts.ok).toBeGreaterThan(10);
  });

  it('keeps serving after one container of each other kind stops (each within 3 s, exit 0), across sites once the east backends are gone', async () => {
    const gateway = grid.byRole('consumer-gateway').find((c) => c.pod.plan.replica === 1);
    if (gateway === undefined) throw new Error('no second consumer gateway replica');

    const [sim] = grid.byRole('sim', 'east');
    if (sim === undefined) throw new Error('no east sim');
    await stopTimed(sim);
    // The operator sees the backend fail its health check and renders an overlay without it; until then the
    // provider gateway answers 502 for it, so "serving" is checked once the grid has converged.
    const answered = await serves(gateway, 10, 90_000);
    expect(answered).not.toContain(simName(sim));

    const providerGateway = grid.byRole('provider-gateway', 'east').find((c) => c.pod.plan.replica === 0);
    if (providerGateway === undefined) throw new Error('no east provider gateway');
    await stopTimed(providerGateway);
    await serves(gateway, 10, 10_000);

    // With no east backend left for the model, the consumer routes across sites: east consumer gateway ->
    // west provider gateway (mTLS, the west gateway's pinned certificate) -> west sim. (Before overlay-sync
    // stops: the overlay without east's backends has to reach the gateway first.)
    for (const other of grid.byRole('sim', 'east').filter((c) => c !== sim)) await stopTimed(other);
    const westSims = grid.byRole('sim', 'west').map(simName);
    const crossSite = await serves(gateway, 5, 120_000);
    for (const provider of crossSite) expect(westSims).toContain(provider);

    const overlaySync = grid.byRole('overlay-sync').find((c) => c.pod === gateway.pod);
    if (overlaySync === undefined) throw new Error('no overlay-sync beside the consumer gateway');
    await stopTimed(overlaySync);
    await serves(gateway, 10, 10_000);

    const [westOperator] = grid.byRole('gossip-operator', 'west');
    if (westOperator === undefined) throw new Error('no west operator');
    await stopTimed(westOperator);
    await serves(gateway, 10, 10_000);
  });
});

describe('SIGINT', () => {
  it('makes every daemon still running exit 0 as PID 1 (operator, overlay-sync, gateways, sims)', async () => {
    const running: RunningContainer[] = [];
    for (const c of grid.containers.filter((x) => !x.init)) {
      if ((await podman(['inspect', '--format', '{{.State.Running}}', c.name])).stdout.trim() === 'true')
        running.push(c);
    }
    expect(new Set(running.map((c) => c.role))).toEqual(
      new Set(['gossip-operator', 'overlay-sync', 'provider-gateway', 'consumer-gateway', 'sim']),
    );
    await Promise.all(running.map((c) => podman(['kill', '--signal', 'SIGINT', c.name])));
    const codes = await Promise.all(
      running.map(async (c) => `${c.name} ${(await podman(['wait', c.name], 30_000)).stdout.trim()}`),
    );
    expect(codes).toEqual(running.map((c) => `${c.name} 0`));
  });
});

describe('usage errors inside the container', () => {
  it.each(['gossip-operator', 'overlay-sync', 'gateway', 'sim'])(
    '%s with an unknown flag exits 2 with one stderr line naming it',
    async (daemon) => {
      const image = grid.containers[0]?.template.image ?? '';
      const result = await podman([
        'run',
        '--rm',
        '--read-only',
        '--user',
        '10001:10001',
        '--cap-drop',
        'all',
        '--entrypoint',
        JSON.stringify(['node', `daemons/${daemon}/main.ts`]),
        image,
        '--no-such-flag',
      ]);
      expect(result.code).toBe(2);
      const lines = result.stderr.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^${daemon}: Unknown option '--no-such-flag'`, 'u'));
    },
  );
});
