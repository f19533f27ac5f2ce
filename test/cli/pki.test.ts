// agn pki as a user runs it in a grid repository (a scaffold with a second site, run as a child process like
// `npx agn`): the PKI it makes is one the operator's own GridSite probe and a real mTLS handshake accept, synth pins
// exactly its certificates, its Secret manifests cover every Secret the compiled site names, a renewal keeps a pin
// for every certificate a gateway may serve, and every wrong input is refused with one line.
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer, type TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { probeSite } from '../../daemons/gossip-operator/probes/site-probe.ts';
import { loadCompiledGrid } from '../../daemons/local-grid/compiled-grid.ts';
import { REPO_ROOT } from '../fixtures-path.ts';
import { withSecondSite } from '../package/declarations.ts';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function agn(cwd: string, ...args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(REPO_ROOT, 'daemons/cli/agn.ts'), ...args],
      { cwd, env: { ...process.env, CDK8S_OUTDIR: '' } },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr });
      },
    );
  });
}

const CONSTRUCTS = join(REPO_ROOT, 'constructs', 'index.ts');
const tmp = mkdtempSync(join(tmpdir(), 'agn-pki-'));
const dir = join(tmp, 'grid');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const read = (path: string): string => readFileSync(join(dir, path), 'utf8');
const derFingerprint = (pem: string): string => createHash('sha256').update(new X509Certificate(pem).raw).digest('hex');
const trustFile = (): {
  network: string;
  ca: { fingerprint: string; certificatePem: string };
  sites: Record<string, { gatewayPins: string[] }>;
} => JSON.parse(read('grid-trust.json'));

interface SecretDoc {
  kind: string;
  type: string;
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  data: Record<string, string>;
}
const secretsOf = (stdout: string): SecretDoc[] => parseAllDocuments(stdout).map((doc) => doc.toJS() as SecretDoc);
const decoded = (secret: SecretDoc | undefined, key: string): string =>
  Buffer.from(secret?.data[key] ?? '', 'base64').toString('utf8');

beforeAll(async () => {
  expect((await agn(tmp, 'init', 'grid')).code).toBe(0);
  writeFileSync(join(dir, 'grid.ts'), withSecondSite(readFileSync(join(dir, 'grid.ts'), 'utf8'), CONSTRUCTS));
}, 60_000);

describe('agn pki init', () => {
  it('makes the PKI owner-only, and a trust file with the CA and one pin per site but no key', async () => {
    const run = await agn(dir, 'pki', 'init');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('created the grid CA (.pki/ca.crt, valid 3650 days)');
    expect(run.stdout).toContain(
      "pass it as the declaration's trust: trust: readGridTrust(new URL('./grid-trust.json', import.meta.url))",
    );
    expect(run.stdout).toContain('agn pki secrets --site west | kubectl --context <west> apply -f -');
    expect(statSync(join(dir, '.pki')).mode & 0o777).toBe(0o700);
    for (const key of [
      'ca.key',
      'swim.key',
      'sites/east/provider-gateway.key',
      'sites/east/consumer-gateway.key',
      'sites/west/site.key',
      'sites/west/credentials/west-llm-credential.token',
    ]) {
      expect(statSync(join(dir, '.pki', key)).mode & 0o777, key).toBe(0o600);
    }
    const trust = read('grid-trust.json');
    expect(trust).not.toMatch(/PRIVATE KEY/u);
    expect(trust).not.toContain(read('.pki/swim.key').trim());
    const parsed = trustFile();
    expect(parsed.network).toBe('my-grid');
    expect(parsed.ca.fingerprint).toBe(derFingerprint(read('.pki/ca.crt')));
    expect(parsed.sites).toEqual({
      east: { gatewayPins: [derFingerprint(read('.pki/sites/east/provider-gateway.crt'))] },
      west: { gatewayPins: [derFingerprint(read('.pki/sites/west/provider-gateway.crt'))] },
    });
    // west has no consumer gateway, so no client certificate.
    expect(existsSync(join(dir, '.pki/sites/west/consumer-gateway.crt'))).toBe(false);
  });

  it('issues certificates that say what the declaration needs, all from the grid CA', () => {
    const ca = new X509Certificate(read('.pki/ca.crt'));
    const provider = new X509Certificate(read('.pki/sites/west/provider-gateway.crt'));
    expect(provider.verify(ca.publicKey)).toBe(true);
    expect(provider.subjectAltName).toContain('DNS:gateway.west.example.com');
    expect(provider.subjectAltName).toContain('DNS:provider-gateway.grid-system.svc.cluster.local');
    const consumer = new X509Certificate(read('.pki/sites/east/consumer-gateway.crt'));
    expect(consumer.verify(ca.publicKey)).toBe(true);
    // The organization both provider gateways' trustedPeers admit.
    expect(consumer.subject.split('\n')).toContain('O=my-grid-consumers');
    const site = new X509Certificate(read('.pki/sites/east/site.crt'));
    expect(site.subject.split('\n')).toContain('CN=east');
    expect(site.subjectAltName).toBe('DNS:east');
    expect(site.keyUsage).toEqual(expect.arrayContaining(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']));
  });

  it("is accepted by the operator's GridSite probe and by a real mTLS handshake with the consumer's certificate", async () => {
    const server = createServer(
      {
        cert: read('.pki/sites/west/provider-gateway.crt'),
        key: read('.pki/sites/west/provider-gateway.key'),
        ca: read('.pki/ca.crt'),
        requestCert: true,
        rejectUnauthorized: true,
      },
      (socket: TLSSocket) => {
        const peer = socket.getPeerCertificate();
        socket.end(`${String(peer.subject?.O ?? '')}\n`);
      },
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    try {
      const probe = await probeSite({
        address: `127.0.0.1:${port}`,
        mode: 'Mutual',
        serverName: 'gateway.west.example.com',
        ca: read('.pki/ca.crt'),
        clientCert: read('.pki/sites/east/site.crt'),
        clientKey: read('.pki/sites/east/site.key'),
        fingerprints: trustFile().sites['west']?.gatewayPins ?? [],
        timeoutMs: 5_000,
      });
      expect(probe).toMatchObject({ outcome: 'verified' });
      const { connect } = await import('node:tls');
      const organization = await new Promise<string>((resolve, reject) => {
        const socket = connect({
          host: '127.0.0.1',
          port,
          servername: 'gateway.west.example.com',
          ca: read('.pki/ca.crt'),
          cert: read('.pki/sites/east/consumer-gateway.crt'),
          key: read('.pki/sites/east/consumer-gateway.key'),
        });
        let text = '';
        socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
        socket.on('end', () => resolve(text.trim()));
        socket.on('error', reject);
      });
      expect(organization).toBe('my-grid-consumers');
      // A pin of another certificate is refused by the same probe.
      const wrong = await probeSite({
        address: `127.0.0.1:${port}`,
        mode: 'Mutual',
        serverName: 'gateway.west.example.com',
        ca: read('.pki/ca.crt'),
        clientCert: read('.pki/sites/east/site.crt'),
        clientKey: read('.pki/sites/east/site.key'),
        fingerprints: trustFile().sites['east']?.gatewayPins ?? [],
        timeoutMs: 5_000,
      });
      expect(wrong.outcome).toBe('pin_mismatch');
    } finally {
      server.close();
    }
  });

  it('keeps everything on a second run, byte for byte', async () => {
    const before = {
      trust: read('grid-trust.json'),
      cert: read('.pki/sites/west/provider-gateway.crt'),
      key: read('.pki/ca.key'),
    };
    const run = await agn(dir, 'pki', 'init');
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n')[0]).toBe('.pki: every certificate and key is current');
    expect({
      trust: read('grid-trust.json'),
      cert: read('.pki/sites/west/provider-gateway.crt'),
      key: read('.pki/ca.key'),
    }).toEqual(before);
  });

  it("has synth pin exactly these certificates in each peer's GridSite", async () => {
    expect((await agn(dir, 'synth', '--out', 'dist')).code).toBe(0);
    const [east, west] = loadCompiledGrid(join(dir, 'dist'));
    const pinOf = (objects: { kind: string; metadata: { name: string }; [k: string]: unknown }[], name: string) =>
      (objects.find((o) => o.kind === 'GridSite' && o.metadata.name === name)!['spec'] as { trust?: unknown }).trust;
    expect(pinOf(east!.objects as never, 'my-grid-west')).toEqual({
      canonicalFingerprints: trustFile().sites['west']?.gatewayPins,
    });
    expect(pinOf(west!.objects as never, 'my-grid-east')).toEqual({
      canonicalFingerprints: trustFile().sites['east']?.gatewayPins,
    });
  });
});

describe('agn pki secrets', () => {
  it('prints every Secret the compiled site names, from the PKI, and lists the ones the user makes', async () => {
    for (const site of ['east', 'west']) {
      const run = await agn(dir, 'pki', 'secrets', '--site', site);
      expect(run.code, run.stderr).toBe(0);
      const secrets = secretsOf(run.stdout);
      const compiled = loadCompiledGrid(join(dir, 'dist')).find((s) => s.site === site)!;
      // Every Secret name the compiled manifests mention (volumes, GridNetwork tls, provider auth).
      const named = new Set<string>();
      const walk = (value: unknown, key = ''): void => {
        if (Array.isArray(value)) for (const v of value) walk(v);
        else if (typeof value === 'object' && value !== null) {
          const record = value as Record<string, unknown>;
          if (
            (key === 'secret' || key.endsWith('SecretRef') || key === 'secretRef') &&
            typeof (record['name'] ?? record['secretName']) === 'string'
          )
            named.add(String(record['name'] ?? record['secretName']));
          for (const [k, v] of Object.entries(record)) walk(v, k);
        }
      };
      walk(compiled.objects);
      const listed = [...run.stderr.matchAll(/^ {2}grid-system\/([a-z0-9.-]+): /gmu)].map((m) => m[1]);
      expect([...secrets.map((s) => s.metadata.name), ...listed].sort(), site).toEqual([...named].sort());
      for (const secret of secrets) {
        expect(secret.metadata.labels['app.kubernetes.io/managed-by']).toBe('agn-pki');
        expect(secret.metadata.namespace).toBe('grid-system');
      }
      expect(run.stderr).not.toMatch(/PRIVATE KEY|BEGIN/u);
    }
    const west = await agn(dir, 'pki', 'secrets', '--site', 'west');
    expect(west.stderr).toContain(
      'grid-system/openai-credential: the bearer token of openai: kubectl -n grid-system create secret generic openai-credential --from-literal=token=<token>',
    );
    const westSecrets = secretsOf(west.stdout);
    const gateway = westSecrets.find((s) => s.metadata.name === 'provider-gateway-tls');
    expect(gateway?.type).toBe('kubernetes.io/tls');
    expect(decoded(gateway, 'tls.crt')).toBe(read('.pki/sites/west/provider-gateway.crt'));
    expect(decoded(gateway, 'ca.crt')).toBe(read('.pki/ca.crt'));
    expect(
      Buffer.from(westSecrets.find((s) => s.metadata.name === 'swim-key')?.data['key'] ?? '', 'base64'),
    ).toHaveLength(32);
    expect(
      decoded(
        westSecrets.find((s) => s.metadata.name === 'west-llm-credential'),
        'token',
      ),
    ).toBe(read('.pki/sites/west/credentials/west-llm-credential.token'));
    const east = await agn(dir, 'pki', 'secrets', '--site', 'east');
    // The scaffold's east has only simulated backends and no caller keys: everything comes from the PKI.
    expect(east.stderr).toBe(
      '6 Secrets of site east from .pki (they hold private keys: pipe them to kubectl, do not store them)\n',
    );
  }, 120_000);

  it('refuses a PKI that does not match the pins the declaration compiles, and an unknown site', async () => {
    const trust = read('grid-trust.json');
    const edited = trustFile();
    edited.sites['west'] = { gatewayPins: ['0'.repeat(64)] };
    writeFileSync(join(dir, 'grid-trust.json'), `${JSON.stringify(edited, null, 2)}\n`);
    const stale = await agn(dir, 'pki', 'secrets', '--site', 'west');
    expect(stale).toMatchObject({ code: 1, stdout: '' });
    expect(stale.stderr).toBe(
      "agn: grid.ts: site west's pins in the trust file are not those of the certificates in .pki; run agn pki init, then synthesize, so dist/ pins what the Secrets carry\n",
    );
    expect((await agn(dir, 'pki', 'status')).code).toBe(1);
    writeFileSync(join(dir, 'grid-trust.json'), trust);
    const unknown = await agn(dir, 'pki', 'secrets', '--site', 'north');
    expect(unknown).toMatchObject({ code: 1, stderr: 'agn: grid.ts: no site north (sites: east, west)\n' });
    const nowhere = await agn(dir, 'pki', 'secrets', '--site', 'east', '--dir', 'elsewhere');
    expect(nowhere).toMatchObject({
      code: 1,
      stderr: 'agn: elsewhere: no grid PKI here (no ca.crt); run agn pki init --dir elsewhere first\n',
    });
  });
});

describe('agn pki renew and status', () => {
  it('renews the pinned certificate in three steps, every peer holding a pin for what the gateway serves', async () => {
    expect((await agn(dir, 'pki', 'status')).code).toBe(0);
    const old = derFingerprint(read('.pki/sites/west/provider-gateway.crt'));
    const stage = await agn(dir, 'pki', 'renew', '--site', 'west', '--stage');
    expect(stage.code, stage.stderr).toBe(0);
    const next = derFingerprint(read('.pki/sites/west/provider-gateway.next.crt'));
    expect(trustFile().sites['west']?.gatewayPins).toEqual([old, next]);
    // Staged only: the Secret still carries the serving certificate.
    const staged = secretsOf((await agn(dir, 'pki', 'secrets', '--site', 'west')).stdout).find(
      (s) => s.metadata.name === 'provider-gateway-tls',
    );
    expect(derFingerprint(decoded(staged, 'tls.crt'))).toBe(old);
    expect((await agn(dir, 'pki', 'renew', '--site', 'west', '--stage')).stderr).toContain(
      'a renewal is already staged',
    );
    expect((await agn(dir, 'pki', 'renew', '--site', 'west', '--activate')).code).toBe(0);
    expect(trustFile().sites['west']?.gatewayPins).toEqual([next, old]);
    const active = secretsOf((await agn(dir, 'pki', 'secrets', '--site', 'west')).stdout).find(
      (s) => s.metadata.name === 'provider-gateway-tls',
    );
    expect(derFingerprint(decoded(active, 'tls.crt'))).toBe(next);
    expect((await agn(dir, 'pki', 'renew', '--site', 'west', '--finish')).code).toBe(0);
    expect(trustFile().sites['west']?.gatewayPins).toEqual([next]);
    expect(
      readdirSync(join(dir, '.pki/sites/west')).filter((f) => f.includes('previous') || f.includes('next')),
    ).toEqual([]);
    expect((await agn(dir, 'pki', 'renew', '--site', 'west', '--finish')).stderr).toContain('nothing to finish');
    const status = await agn(dir, 'pki', 'status');
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toMatch(/^west provider-gateway {2}expires \d{4}-\d\d-\d\d \(36[45] days\)$/mu);
  }, 180_000);

  it('re-issues a certificate whose names changed, and says its pin changed', async () => {
    const grid = read('grid.ts');
    writeFileSync(join(dir, 'grid.ts'), grid.replaceAll('gateway.west.example.com', 'edge.west.example.com'));
    const run = await agn(dir, 'pki', 'init');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(
      'west: re-issued the provider-gateway certificate (it does not name edge.west.example.com); its pin changed: synthesize and apply every site',
    );
    expect(new X509Certificate(read('.pki/sites/west/provider-gateway.crt')).subjectAltName).toContain(
      'DNS:edge.west.example.com',
    );
    writeFileSync(join(dir, 'grid.ts'), grid);
    expect((await agn(dir, 'pki', 'init')).code).toBe(0);
  });
});

describe('wrong input', () => {
  it('answers usage mistakes with one line and exit 2, and --help with usage', async () => {
    for (const args of [
      ['pki', 'secrets'],
      ['pki', 'renew', '--site', 'west'],
      ['pki', 'renew', '--site', 'west', '--stage', '--finish'],
      ['pki', 'init', '--leaf-days', '0'],
      ['pki', 'init', '--leaf-days', '1.5'],
      ['pki', 'init', '--frobnicate'],
      ['pki', 'frobnicate'],
    ]) {
      const run = await agn(dir, ...args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr.trimEnd().split('\n'), args.join(' ')).toHaveLength(1);
    }
    const help = await agn(dir, 'pki', 'init', '--help');
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage: agn pki init \[FILE\]/u);
  }, 120_000);

  it('refuses a trust file of another network, a broken one, and a CA key that is not one, writing nothing', async () => {
    const trust = read('grid-trust.json');
    writeFileSync(join(dir, 'grid-trust.json'), trust.replace('"network": "my-grid"', '"network": "other"'));
    const other = await agn(dir, 'pki', 'init');
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('the trust file is for network other, not my-grid');
    writeFileSync(join(dir, 'grid-trust.json'), '{ not json');
    const broken = await agn(dir, 'pki', 'init');
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(
      /^agn: grid\.ts: could not load the declaration: .*grid-trust\.json: not a trust file/u,
    );
    writeFileSync(join(dir, 'grid-trust.json'), trust);
    const key = read('.pki/ca.key');
    writeFileSync(join(dir, '.pki/ca.key'), '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n');
    const badKey = await agn(dir, 'pki', 'init');
    expect(badKey.code).toBe(1);
    expect(badKey.stderr).toMatch(
      /^agn: \.pki\/ca\.crt, \.pki\/ca\.key: not a usable CA certificate and ECDSA P-256 key/u,
    );
    expect(badKey.stderr).not.toContain('AAAA');
    writeFileSync(join(dir, '.pki/ca.key'), key);
    expect(read('grid-trust.json')).toBe(trust);
  }, 60_000);

  it('refuses to start a second CA beside a trust file it did not make', async () => {
    const run = await agn(dir, 'pki', 'init', '--dir', 'fresh');
    expect(run).toMatchObject({ code: 1, stdout: '' });
    expect(run.stderr).toBe(
      'agn: grid-trust.json exists but fresh holds no CA: point --dir at the PKI it was made from (a new CA would invalidate every certificate of the grid), or remove grid-trust.json to start anew\n',
    );
    expect(existsSync(join(dir, 'fresh'))).toBe(false);
  });
});
