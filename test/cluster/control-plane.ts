// Starts a real etcd and kube-apiserver on loopback for the cluster suite and tears them down again.
// Binaries come from test/cluster/build-control-plane.sh (a cached Go build of k8s.io/kubernetes and etcd).
// Every child is tracked by pid: stop() waits for each to exit and checks that none is left running.
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generatePki, readPem, renderKubeconfig } from './certs.ts';
import type { ControlPlanePki } from './certs.ts';
import { type Daemon, launch, terminate as terminateDaemon, waitHttp } from '../child-daemon.ts';

const here = dirname(fileURLToPath(import.meta.url));

export interface ControlPlane {
  readonly server: string; // https://127.0.0.1:<port>
  readonly kubeconfigPath: string; // admin (system:masters) kubeconfig
  readonly caPem: string;
  readonly workDir: string;
  readonly etcdUrl: string;
  pids(): { etcd: number; apiserver: number };
  // Stops and starts kube-apiserver only (etcd and its data stay), e.g. to prove a watch survives it.
  // `whileDown` runs after the old process has exited and before the new one starts (etcd is up).
  restartApiServer(whileDown?: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

export interface StartOptions {
  readonly binDir?: string; // directory with kube-apiserver and etcd; default: run the build script
  readonly readyTimeoutMs?: number;
  readonly keepWorkDir?: boolean; // leave logs and certs behind for debugging
}

// Resolves the binaries: AGN_CONTROL_PLANE_BIN, or the build script's cache (a no-op once built).
export function resolveBinDir(): string {
  const fromEnv = process.env.AGN_CONTROL_PLANE_BIN;
  if (fromEnv) return fromEnv;
  const script = join(here, 'build-control-plane.sh');
  const result = spawnSync('bash', [script], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = (result.stdout ?? '').trim().split('\n');
  const dir = lines[lines.length - 1] ?? '';
  if (result.status !== 0 || dir === '') {
    throw new Error(`${script} failed (exit ${String(result.status)}); run it by hand to see why`);
  }
  return dir;
}

/** A control-plane binary started with its output in logPath. */
function start(name: string, bin: string, args: readonly string[], logPath: string): Daemon {
  return launch(name, [bin, ...args], logPath, { missingHint: 'run test/cluster/build-control-plane.sh' });
}

/** kube-apiserver's shutdown drains its watches: 15 s before SIGKILL. */
function terminate(d: Daemon): Promise<void> {
  return terminateDaemon(d, 15_000);
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

// Only a port taken between freePort() and the daemon's bind is worth another try; any other failure is real.
function lostPortRace(err: unknown): boolean {
  return /address already in use/.test((err as Error).message);
}

function etcdArgs(dataDir: string, clientPort: number, peerPort: number): string[] {
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  return [
    '--name=agn-test',
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${client}`,
    `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=agn-test=${peer}`,
    '--initial-cluster-state=new',
    // A test cluster: durability is not the point, and fsync latency on a shared disk slows every write.
    '--unsafe-no-fsync',
    '--log-level=warn',
  ];
}

function apiServerArgs(pki: ControlPlanePki, workDir: string, etcdUrl: string, port: number): string[] {
  return [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${join(workDir, 'apiserver-certs')}`,
    `--tls-cert-file=${pki.serverCert}`,
    `--tls-private-key-file=${pki.serverKey}`,
    `--client-ca-file=${pki.caCert}`,
    '--authorization-mode=RBAC',
    '--anonymous-auth=false',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    `--service-account-key-file=${pki.serviceAccountPub}`,
    `--service-account-signing-key-file=${pki.serviceAccountKey}`,
    // Only used to allocate the `kubernetes` Service's ClusterIP; no traffic goes there.
    '--service-cluster-ip-range=10.96.0.0/24',
    // With the default (0) an open watch keeps the old process alive after SIGTERM until it is killed; a short
    // grace makes the server close its watches itself, so a restart under a watch takes seconds, not the kill timeout.
    '--shutdown-watch-termination-grace-period=2s',
    '--allow-privileged=false',
    '--profiling=false',
    '--v=1',
  ];
}

export async function startControlPlane(options: StartOptions = {}): Promise<ControlPlane> {
  const binDir = options.binDir ?? resolveBinDir();
  const readyTimeoutMs = options.readyTimeoutMs ?? 120_000;
  const workDir = await mkdtemp(join(tmpdir(), 'agn-control-plane-'));
  const started: Daemon[] = [];
  try {
    const pki = await generatePki(workDir);
    const caPem = await readPem(pki.caCert);
    const adminTls = { ca: caPem, cert: await readPem(pki.adminCert), key: await readPem(pki.adminKey) };

    // Ports are picked free then handed over; another process could grab one in between, so a start that
    // loses that race is retried with fresh ports.
    let etcd: Daemon | undefined;
    let etcdUrl = '';
    for (let attempt = 1; etcd === undefined; attempt++) {
      const [clientPort, peerPort] = [await freePort(), await freePort()];
      etcdUrl = `http://127.0.0.1:${clientPort}`;
      const d = start(
        'etcd',
        join(binDir, 'etcd'),
        etcdArgs(join(workDir, `etcd-data-${attempt}`), clientPort, peerPort),
        join(workDir, 'etcd.log'),
      );
      started.push(d);
      try {
        await waitHttp(d, { url: `${etcdUrl}/health` }, readyTimeoutMs, (b) => b.includes('"health":"true"'));
        etcd = d;
      } catch (err) {
        await terminate(d);
        if (attempt >= 3 || !lostPortRace(err)) throw err;
      }
    }

    let port = 0;
    let apiserver: Daemon | undefined;
    const startApiServer = async (fixedPort?: number): Promise<Daemon> => {
      for (let attempt = 1; ; attempt++) {
        const p = fixedPort ?? (await freePort());
        const d = start(
          'kube-apiserver',
          join(binDir, 'kube-apiserver'),
          apiServerArgs(pki, workDir, etcdUrl, p),
          join(workDir, 'kube-apiserver.log'),
        );
        started.push(d);
        try {
          await waitHttp(d, { url: `https://127.0.0.1:${p}/readyz`, tls: adminTls }, readyTimeoutMs);
          port = p;
          return d;
        } catch (err) {
          await terminate(d);
          if (fixedPort !== undefined || attempt >= 3 || !lostPortRace(err)) throw err;
        }
      }
    };
    apiserver = await startApiServer();
    const server = `https://127.0.0.1:${port}`;

    const kubeconfigPath = join(workDir, 'admin.kubeconfig');
    await writeFile(
      kubeconfigPath,
      renderKubeconfig(server, caPem, { name: 'agn-test-admin', clientCert: adminTls.cert, clientKey: adminTls.key }),
      { mode: 0o600 },
    );

    const etcdDaemon = etcd;
    return {
      server,
      kubeconfigPath,
      caPem,
      workDir,
      etcdUrl,
      pids: () => ({ etcd: etcdDaemon.pid, apiserver: apiserver?.pid ?? 0 }),
      async restartApiServer(whileDown?: () => Promise<void>) {
        if (apiserver) await terminate(apiserver);
        await whileDown?.();
        apiserver = await startApiServer(port);
      },
      async stop() {
        const errors: string[] = [];
        // API server first: it would otherwise log etcd connection errors while shutting down.
        for (const d of [...started].reverse()) {
          try {
            await terminate(d);
          } catch (err) {
            errors.push((err as Error).message);
          }
        }
        if (!options.keepWorkDir) await rm(workDir, { recursive: true, force: true });
        if (errors.length > 0) throw new Error(`control plane teardown: ${errors.join('; ')}`);
      },
    };
  } catch (err) {
    for (const d of started.reverse()) await terminate(d).catch(() => {});
    if (!options.keepWorkDir) await rm(workDir, { recursive: true, force: true });
    throw err;
  }
}
