// How the daemons reach the API server: kubeconfig files (kubectl's merge of $KUBECONFIG, paths relative to the
// file, data or files for certificates), the in-cluster ServiceAccount, tokens that rotate, exec credential plugins,
// and every malformed or unsupported configuration refused with the file and the entry it is about. Requests go to
// a real HTTPS server with generated certificates that records what each request presented.
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { ensureGridPki, type GridPki } from '../../daemons/local-grid/pki.ts';
import { KubeHttp } from '../../daemons/shared/resource-store/kube-http.ts';
import {
  inClusterContext,
  KubeConnection,
  kubeconfigContext,
  loadKubeConfig,
} from '../../daemons/shared/resource-store/kubeconfig.ts';
import { ResourceStoreError } from '../../daemons/shared/resource-store/errors.ts';

const SECRET_TOKEN = 'kubeconfig-test-token-6b1d0f';

let dir: string;
let pki: GridPki;
let server: Server;
let url: string;
const seen: { authorization?: string; clientCn?: string }[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'agn-kubeconfig-'));
  pki = await ensureGridPki(join(dir, 'pki'), ['west']);
  const site = pki.sites[0]!;
  server = createServer(
    {
      cert: readFileSync(site.providerGateway.certFile),
      key: readFileSync(site.providerGateway.keyFile),
      ca: readFileSync(pki.caFile),
      requestCert: true,
      rejectUnauthorized: false,
    },
    (req, res) => {
      const peer = (req.socket as TLSSocket).getPeerCertificate();
      const cn = peer?.subject?.CN;
      seen.push({ authorization: req.headers.authorization, clientCn: Array.isArray(cn) ? cn.join(',') : cn });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ kind: 'APIVersions', versions: ['v1'] }));
    },
  );
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

function write(name: string, doc: unknown): string {
  const path = join(dir, name);
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, typeof doc === 'string' ? doc : stringify(doc));
  return path;
}

function kubeconfig(
  user: Record<string, unknown>,
  cluster: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'main',
    contexts: [{ name: 'main', context: { cluster: 'c', user: 'u', namespace: 'grid' } }],
    clusters: [
      {
        name: 'c',
        cluster: { server: url, 'certificate-authority-data': readFileSync(pki.caFile).toString('base64'), ...cluster },
      },
    ],
    users: [{ name: 'u', user }],
    ...extra,
  };
}

async function call(
  connection: KubeConnection,
): Promise<{ status: number; authorization?: string; clientCn?: string }> {
  const before = seen.length;
  const response = await new KubeHttp(connection).request({ method: 'GET', path: '/api' });
  expect(seen.length).toBe(before + 1);
  return { status: response.status, ...seen[seen.length - 1]! };
}

function refusal(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ResourceStoreError);
    return (error as Error).message;
  }
  throw new Error('expected a refusal');
}

describe('kubeconfig files', () => {
  it('presents a client certificate given as data, trusting the CA given as data', async () => {
    const site = pki.sites[0]!;
    const path = write(
      'data/config',
      kubeconfig({
        'client-certificate-data': readFileSync(site.consumerClient.certFile).toString('base64'),
        'client-key-data': readFileSync(site.consumerClient.keyFile).toString('base64'),
      }),
    );
    const connection = loadKubeConfig({ kubeconfigPath: path });
    expect(connection.context.namespace).toBe('grid');
    const got = await call(connection);
    expect(got.status).toBe(200);
    expect(got.clientCn).toBeDefined();
    expect(got.authorization).toBeUndefined();
  });

  it('reads certificate files relative to the kubeconfig that names them', async () => {
    const site = pki.sites[0]!;
    write('rel/certs/ca.crt', readFileSync(pki.caFile, 'utf8'));
    write('rel/certs/client.crt', readFileSync(site.consumerClient.certFile, 'utf8'));
    write('rel/certs/client.key', readFileSync(site.consumerClient.keyFile, 'utf8'));
    const path = write(
      'rel/config',
      kubeconfig(
        { 'client-certificate': 'certs/client.crt', 'client-key': 'certs/client.key' },
        { 'certificate-authority-data': undefined, 'certificate-authority': 'certs/ca.crt' },
      ),
    );
    expect((await call(loadKubeConfig({ kubeconfigPath: path }))).clientCn).toBeDefined();
  });

  it('refuses a server whose certificate the configured CA did not sign, and connects with insecure-skip-tls-verify', async () => {
    const other = await ensureGridPki(join(dir, 'other-pki'), ['east']);
    const path = write(
      'wrong-ca/config',
      kubeconfig(
        { token: SECRET_TOKEN },
        { 'certificate-authority-data': readFileSync(other.caFile).toString('base64') },
      ),
    );
    const error = await new KubeHttp(loadKubeConfig({ kubeconfigPath: path }))
      .request({ method: 'GET', path: '/api' })
      .catch((e: Error) => e);
    expect(error).toBeInstanceOf(ResourceStoreError);
    expect((error as Error).message).not.toContain(SECRET_TOKEN);
    const insecure = write(
      'insecure/config',
      kubeconfig(
        { token: SECRET_TOKEN },
        { 'certificate-authority-data': undefined, 'insecure-skip-tls-verify': true },
      ),
    );
    expect((await call(loadKubeConfig({ kubeconfigPath: insecure }))).authorization).toBe(`Bearer ${SECRET_TOKEN}`);
  });

  it('sends a bearer token, or basic credentials', async () => {
    expect(
      (await call(loadKubeConfig({ kubeconfigPath: write('token/config', kubeconfig({ token: SECRET_TOKEN })) })))
        .authorization,
    ).toBe(`Bearer ${SECRET_TOKEN}`);
    const basic = await call(
      loadKubeConfig({ kubeconfigPath: write('basic/config', kubeconfig({ username: 'ada', password: 'pw' })) }),
    );
    expect(basic.authorization).toBe(`Basic ${Buffer.from('ada:pw').toString('base64')}`);
  });

  it('re-reads a rotated token file, at most every 10 s, and keeps the last token while the file is briefly gone', async () => {
    const tokenPath = write('rotating/token', 'first-token\n');
    const path = write('rotating/config', kubeconfig({ tokenFile: 'token' }));
    let now = 1_000_000;
    const connection = new KubeConnection(kubeconfigContext([path]), () => now);
    expect((await call(connection)).authorization).toBe('Bearer first-token');
    writeFileSync(tokenPath, 'second-token\n');
    now += 5_000;
    expect((await call(connection)).authorization).toBe('Bearer first-token');
    now += 5_000;
    expect((await call(connection)).authorization).toBe('Bearer second-token');
    rmSync(tokenPath);
    now += 10_000;
    expect((await call(connection)).authorization).toBe('Bearer second-token');
  });

  it('merges $KUBECONFIG like kubectl: the first file to set current-context or a named entry wins, missing files are skipped', async () => {
    const first = write('merge/a', {
      'current-context': 'second',
      contexts: [],
      clusters: [],
      users: [{ name: 'u2', user: { token: 'from-a' } }],
    });
    const second = write('merge/b', {
      'current-context': 'main',
      contexts: [{ name: 'second', context: { cluster: 'c', user: 'u2' } }],
      clusters: [{ name: 'c', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u2', user: { token: 'from-b' } }],
    });
    const env = { KUBECONFIG: [join(dir, 'merge/missing'), first, second].join(delimiter) };
    const connection = loadKubeConfig({}, env);
    expect(connection.context.contextName).toBe('second');
    expect((await call(connection)).authorization).toBe('Bearer from-a');
    expect(loadKubeConfig({ context: 'second' }, env).context.server).toBe(url);
  });

  it('refuses what it cannot honour, naming the file and the entry', () => {
    const cases: [string, unknown, RegExp][] = [
      ['no current context', { ...(kubeconfig({}) as object), 'current-context': undefined }, /no current-context/],
      [
        'unknown context',
        { ...(kubeconfig({}) as object), 'current-context': 'nope' },
        /context "nope" is not defined/,
      ],
      [
        'unknown cluster',
        { ...(kubeconfig({}) as object), clusters: [] },
        /cluster "c" of context "main" is not defined/,
      ],
      ['unknown user', { ...(kubeconfig({}) as object), users: [] }, /user "u" of context "main" is not defined/],
      [
        'server not a URL',
        kubeconfig({}, { server: 'api.example:6443' }),
        /cluster "c"\.server "api\.example:6443" is not an http\(s\) URL/,
      ],
      ['proxy-url', kubeconfig({}, { 'proxy-url': 'http://proxy:3128' }), /cluster "c"\.proxy-url is not supported/],
      [
        'auth-provider',
        kubeconfig({ 'auth-provider': { name: 'gcp', config: { 'access-token': SECRET_TOKEN } } }),
        /user "u" uses auth-provider "gcp", which is not supported/,
      ],
      [
        'certificate without key',
        kubeconfig({ 'client-certificate-data': 'QQ==' }),
        /user "u" has a client certificate without its key/,
      ],
      [
        'unreadable CA file',
        kubeconfig({}, { 'certificate-authority-data': undefined, 'certificate-authority': 'no/such/ca.crt' }),
        /cluster "c"\.certificate-authority: cannot read .*no\/such\/ca\.crt \(ENOENT\)/,
      ],
      [
        'exec apiVersion',
        kubeconfig({ exec: { command: 'x', apiVersion: 'client.authentication.k8s.io/v1alpha1' } }),
        /user "u"\.exec\.apiVersion "client\.authentication\.k8s\.io\/v1alpha1" is not supported/,
      ],
      [
        'exec without command',
        kubeconfig({ exec: { apiVersion: 'client.authentication.k8s.io/v1' } }),
        /user "u"\.exec\.command is missing/,
      ],
      ['users not a list', { ...(kubeconfig({}) as object), users: { u: {} } }, /users is not a list/],
      [
        'entry without a name',
        { ...(kubeconfig({}) as object), contexts: [{ context: {} }] },
        /contexts\[0\]\.name is missing/,
      ],
      ['not YAML', 'clusters: [\n', /not YAML/],
    ];
    for (const [name, doc, expected] of cases) {
      const path = write(`bad/${name.replaceAll(' ', '-')}`, doc);
      const message = refusal(() => loadKubeConfig({ kubeconfigPath: path }));
      expect(message, name).toMatch(expected);
      expect(message, name).toContain(path);
      expect(message, name).not.toContain(SECRET_TOKEN);
    }
    expect(refusal(() => loadKubeConfig({ kubeconfigPath: join(dir, 'absent') }))).toMatch(
      /kubeconfig .*absent: cannot read \(ENOENT\)/,
    );
    expect(refusal(() => loadKubeConfig({}, { KUBECONFIG: join(dir, 'absent') }))).toMatch(
      /no Kubernetes cluster configured/,
    );
  });
});

describe('exec credential plugins', () => {
  // A real plugin process: counts its runs in a file, prints an ExecCredential whose expiry the test chooses.
  function plugin(name: string, body: string): string {
    const path = write(`exec/${name}`, `#!/bin/sh\necho run >> "$0.runs"\n${body}\n`);
    chmodSync(path, 0o755);
    return path;
  }
  const runs = (path: string) => readFileSync(`${path}.runs`, 'utf8').split('\n').filter(Boolean).length;

  it('runs the plugin once while its credential is valid, passes KUBERNETES_EXEC_INFO and its env, and sends the token', async () => {
    const expires = new Date(Date.now() + 3_600_000).toISOString();
    const path = plugin(
      'valid',
      `test "$GREETING" = hi || exit 3\necho "$KUBERNETES_EXEC_INFO" | grep -q '"kind":"ExecCredential"' || exit 4\necho '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"${SECRET_TOKEN}","expirationTimestamp":"${expires}"}}'`,
    );
    const config = write(
      'exec/valid.yaml',
      kubeconfig({
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: path,
          env: [{ name: 'GREETING', value: 'hi' }],
        },
      }),
    );
    const connection = loadKubeConfig({ kubeconfigPath: config });
    // Three requests at once still run the plugin once: they share its pending answer.
    const before = seen.length;
    const http = new KubeHttp(connection);
    await Promise.all([1, 2, 3].map(() => http.request({ method: 'GET', path: '/api' })));
    expect(seen.slice(before).map((r) => r.authorization)).toEqual(Array(3).fill(`Bearer ${SECRET_TOKEN}`));
    expect(runs(path)).toBe(1);
  });

  it('runs the plugin again once the credential is within 10 s of its expiry', async () => {
    const expires = new Date(Date.now() + 5_000).toISOString();
    const path = plugin(
      'expiring',
      `echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"short","expirationTimestamp":"${expires}"}}'`,
    );
    const config = write(
      'exec/expiring.yaml',
      kubeconfig({ exec: { apiVersion: 'client.authentication.k8s.io/v1beta1', command: path } }),
    );
    const connection = loadKubeConfig({ kubeconfigPath: config });
    await call(connection);
    await call(connection);
    expect(runs(path)).toBe(2);
  });

  it('a failing plugin is an error that names it but carries none of its output, and is retried on the next request', async () => {
    const path = plugin('failing', `echo "${SECRET_TOKEN}"\necho "${SECRET_TOKEN}" >&2\nexit 7`);
    const config = write(
      'exec/failing.yaml',
      kubeconfig({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: path } }),
    );
    const http = new KubeHttp(loadKubeConfig({ kubeconfigPath: config }));
    for (let i = 0; i < 2; i++) {
      const error = (await http.request({ method: 'GET', path: '/api' }).catch((e: Error) => e)) as Error;
      expect(error.message).toContain(`exec credential plugin "${path}" failed (exit 7)`);
      expect(error.message).not.toContain(SECRET_TOKEN);
    }
    expect(runs(path)).toBe(2);
    const garbage = plugin('garbage', `echo 'token=${SECRET_TOKEN}'`);
    const garbageConfig = write(
      'exec/garbage.yaml',
      kubeconfig({ exec: { apiVersion: 'client.authentication.k8s.io/v1', command: garbage } }),
    );
    const message = (
      (await new KubeHttp(loadKubeConfig({ kubeconfigPath: garbageConfig }))
        .request({ method: 'GET', path: '/api' })
        .catch((e: Error) => e)) as Error
    ).message;
    expect(message).toContain('printed no ExecCredential JSON');
    expect(message).not.toContain(SECRET_TOKEN);
    const missing = write(
      'exec/missing.yaml',
      kubeconfig({
        exec: {
          apiVersion: 'client.authentication.k8s.io/v1',
          command: 'agn-no-such-plugin',
          installHint: 'install it from example.com',
        },
      }),
    );
    expect(
      (
        (await new KubeHttp(loadKubeConfig({ kubeconfigPath: missing }))
          .request({ method: 'GET', path: '/api' })
          .catch((e: Error) => e)) as Error
      ).message,
    ).toContain('exec credential plugin "agn-no-such-plugin" not found (install it from example.com)');
  });
});

describe('in cluster', () => {
  function serviceAccountDir(files: Record<string, string>): string {
    const sa = mkdtempSync(join(dir, 'sa-'));
    for (const [name, text] of Object.entries(files)) writeFileSync(join(sa, name), text);
    return sa;
  }

  it('uses the Service environment, the mounted CA and the ServiceAccount token', async () => {
    const sa = serviceAccountDir({
      token: `${SECRET_TOKEN}\n`,
      'ca.crt': readFileSync(pki.caFile, 'utf8'),
      namespace: 'grid-system',
    });
    const port = new URL(url).port;
    const context = inClusterContext({ KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port }, sa);
    expect(context).toMatchObject({ server: url, namespace: 'grid-system', contextName: 'in-cluster' });
    expect((await call(new KubeConnection(context))).authorization).toBe(`Bearer ${SECRET_TOKEN}`);
    expect(inClusterContext({ KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '443' }, sa).server).toBe(
      'https://[fd00::1]:443',
    );
  });

  it('says what is missing when the pod has no ServiceAccount token or no Service environment', () => {
    const noToken = serviceAccountDir({ 'ca.crt': 'x' });
    expect(
      refusal(() => inClusterContext({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' }, noToken)),
    ).toMatch(/no ServiceAccount token at .*token \(automountServiceAccountToken off\?\)/);
    expect(refusal(() => inClusterContext({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, noToken))).toMatch(
      /needs KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT/,
    );
  });
});
