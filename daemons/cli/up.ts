/**
 * `agn up`: the whole compiled grid (dist/) on this machine, one command. Generates the grid PKI and Secrets in a
 * state directory (default .state/ in the repo, reused by the next start), starts every site's processes on
 * loopback, prints a live table and a ready-to-paste curl, restarts a daemon that exits on its own (with backoff, see
 * local-grid/restart-policy.ts), and stops everything on Ctrl-C. Under CI (CI=true) or with --check it stops after
 * the first routed chat completion and exits 0 (1 on failure).
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { formatAddresses, formatSnapshot, readOverlays, snapshot } from '../local-grid/grid-status.ts';
import { DEFAULT_GRID_HOME, type GridProfile, type LocalGrid, startLocalGrid } from '../local-grid/runner.ts';
import { describeSupervisorEvent, ProcessStartError } from '../local-grid/supervisor.ts';
import { chatCompletion, curlFor, waitFor } from '../local-grid/traffic.ts';
import { CliError, usageError } from './cli-error.ts';
import type { CommandResult } from './overlay-commands.ts';

export const UP_USAGE =
  'up [--dist DIR] [--state DIR] [--check] [--demo] [--profile compiled|fast] [--backend SITE/HOST:PORT=LOCAL_HOST:PORT ...]';

export interface UpOptions {
  readonly dist: string;
  readonly state: string;
  readonly check: boolean;
  readonly demo: boolean;
  readonly profile: GridProfile;
  /** In-cluster backends the manifests name, served here by the user (an MCP server, an A2A agent). */
  readonly backends: readonly { readonly site: string; readonly address: string; readonly endpoint: string }[];
}

const BACKEND = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([A-Za-z0-9.-]+:\d{1,5})=([A-Za-z0-9.-]+:\d{1,5})$/;

/** `--backend east/db-tools.tools.svc.cluster.local:8080=127.0.0.1:9000`: the Service address as compiled, and where it listens here. */
export function parseBackend(value: string): UpOptions['backends'][number] {
  const match = BACKEND.exec(value);
  if (match === null)
    throw usageError(
      `--backend ${value}: expected SITE/HOST:PORT=LOCAL_HOST:PORT, e.g. east/db-tools.tools.svc.cluster.local:8080=127.0.0.1:9000`,
    );
  return { site: match[1]!, address: match[3]!, endpoint: match[4]! };
}

export function parseUpArgs(args: readonly string[], env: NodeJS.ProcessEnv): UpOptions {
  let values: { dist?: string; state?: string; check?: boolean; demo?: boolean; profile?: string; backend?: string[] };
  try {
    values = parseArgs({
      args: [...args],
      options: {
        dist: { type: 'string' },
        state: { type: 'string' },
        check: { type: 'boolean' },
        demo: { type: 'boolean' },
        profile: { type: 'string' },
        backend: { type: 'string', multiple: true },
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (error) {
    throw usageError(String((error as Error).message).split('\n')[0] ?? 'invalid arguments');
  }
  const profile = values.profile ?? (values.demo === true ? 'fast' : 'compiled');
  if (profile !== 'compiled' && profile !== 'fast') throw usageError('--profile must be compiled or fast');
  return {
    dist: resolve(values.dist ?? join(DEFAULT_GRID_HOME, 'dist')),
    state: resolve(values.state ?? join(DEFAULT_GRID_HOME, '.state')),
    check: values.check === true || (env['CI'] === 'true' && values.demo !== true),
    demo: values.demo === true,
    profile,
    backends: (values.backend ?? []).map(parseBackend),
  };
}

function say(started: number, message: string): void {
  process.stdout.write(`[${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s] ${message}\n`);
}

/** The model and consumer to try first: a model the consumer's own overlay has a candidate for. */
async function firstRoute(grid: LocalGrid): Promise<{ listen: string; model: string } | undefined> {
  const consumer = grid.byRole('consumer-gateway')[0];
  if (consumer?.listenAddress === undefined) return undefined;
  const overlays = (await readOverlays(grid)).filter((o) => o.site === consumer.site);
  const candidate = overlays
    .flatMap((o) => o.candidates)
    .find((c) => c.kind === 'inference_model' && c.admission_state === 'new_and_existing' && c.fresh);
  return candidate === undefined ? undefined : { listen: consumer.listenAddress, model: candidate.name };
}

/**
 * Each site operator's fleet dashboard (its admin listener), printed beside the curl line. A site compiled with token
 * access gets the URL that carries its token (this terminal only, as the demo key): opened once, the browser keeps a
 * session cookie and the token leaves the address bar.
 */
function dashboardLines(grid: LocalGrid): string {
  const urls = grid.sites.flatMap((s) => {
    const dashboard = grid.dashboard(s.site);
    if (dashboard === undefined) return [];
    return [
      `  ${s.site}: ${dashboard.openUrl}${dashboard.token === undefined ? '' : '  (token access: the link carries the token)'}`,
    ];
  });
  return urls.length === 0 ? '' : `Fleet dashboard (open in a browser):\n${urls.join('\n')}\n`;
}

export async function upCommand(args: readonly string[]): Promise<CommandResult> {
  const options = parseUpArgs(args, process.env);
  const started = Date.now();
  say(
    started,
    `starting the compiled grid from ${options.dist} (state ${options.state}, profile ${options.profile}${options.check ? ', check mode' : ''})`,
  );
  // Signals are ours from the first moment: the daemons run in their own process groups, so an interrupted start
  // must stop what it already started rather than leave it behind.
  let created: LocalGrid | undefined;
  let interrupted: string | undefined;
  let stopping: Promise<void> | undefined;
  let resolveSignal: (() => void) | undefined;
  const stop = (why: string) => {
    stopping ??= (async () => {
      say(started, `${why}: stopping every process`);
      await created?.stop();
      say(started, 'stopped');
    })();
    return stopping;
  };
  const onSignal = (signal: NodeJS.Signals) => {
    interrupted ??= signal;
    void stop(signal).then(() => resolveSignal?.());
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const release = () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
  let grid: LocalGrid;
  try {
    grid = await startLocalGrid({
      distDir: options.dist,
      stateDir: options.state,
      profile: options.profile,
      backends: options.backends,
      progress: (m) => say(started, m),
      onCreated: (g) => {
        created = g;
        // Exits, restarts and failed restarts from the first process on, each with its log.
        g.supervisor.onEvent = (event) => say(started, describeSupervisorEvent(event));
      },
    });
  } catch (error) {
    await stop('start failed');
    release();
    if (interrupted !== undefined)
      return {
        stdout: '',
        stderr: `agn up: interrupted by ${interrupted} during start; every process stopped`,
        exitCode: 1,
      };
    if (error instanceof ProcessStartError)
      throw new CliError(`${error.message}\n(all processes stopped; logs in ${join(options.state, 'logs')})`, 1);
    throw new CliError(`cannot start the grid: ${(error as Error).message}`, 1);
  }
  try {
    say(started, `all ${grid.processes.length} processes up; logs in ${grid.logDir}`);
    process.stdout.write(formatAddresses(grid));
    const route = await waitFor('an overlay candidate at the consumer gateway', () => firstRoute(grid), 60_000);
    say(started, `waiting for the first routed chat completion (model ${route.model} via ${route.listen})`);
    const first = await waitFor(
      'the first routed chat completion',
      async () => {
        const result = await chatCompletion(route.listen, route.model, 10_000, grid.demoKey());
        return result.status === 200 && result.provider !== undefined ? result : undefined;
      },
      60_000,
      200,
    );
    const seconds = (Date.now() - started) / 1000;
    say(started, `first routed chat completion after ${seconds.toFixed(1)} s from start: served by ${first.provider}`);
    process.stdout.write(formatSnapshot(await snapshot(grid)));
    if (options.check) {
      await stop('check passed');
      release();
      return {
        stdout: `agn up --check: ok, first routed chat completion ${seconds.toFixed(1)} s after start\n`,
        exitCode: 0,
      };
    }
    // The demo key goes to this terminal only (as `agn key mint` prints a key); logs never carry it.
    const tenantLine =
      grid.demoKeys.length === 0
        ? ''
        : `  (the key is tenant ${grid.demoKeys[0]!.tenant}'s demo key; every tenant's is in ${join(grid.stateDir, 'caller-keys', 'demo-keys.json')})\n`;
    process.stdout.write(
      `\nTry it:\n  ${curlFor(route.listen, route.model, grid.demoKey())}\n${tenantLine}${dashboardLines(grid)}\n`,
    );
    if (options.demo) {
      const { runDemo } = await import('./demo.ts');
      await runDemo(grid, (m) => say(started, m));
      process.stdout.write(formatSnapshot(await snapshot(grid)));
    }
    if (stopping === undefined) {
      process.stdout.write('Ctrl-C stops the grid.\n');
      await new Promise<void>((resolve) => {
        const tick = setInterval(
          () => {
            void snapshot(grid).then((view) => {
              if (stopping === undefined)
                process.stdout.write(`\n${new Date().toISOString()}\n${formatSnapshot(view)}`);
            });
          },
          process.stdout.isTTY ? 10_000 : 60_000,
        );
        resolveSignal = () => {
          clearInterval(tick);
          resolve();
        };
      });
    }
    await stopping;
    release();
    return { stdout: '', exitCode: 0 };
  } catch (error) {
    await stop(interrupted ?? 'failure');
    release();
    if (interrupted !== undefined) return { stdout: '', exitCode: 0 };
    throw new CliError(`${(error as Error).message} (logs in ${grid.logDir})`, 1);
  }
}
