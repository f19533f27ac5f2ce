// The dashboard's token access over a real admin HTTP server and a real token file laid out as the kubelet projects
// a Secret (`..data` symlink swapped on rotation): bearer, the ?token= → cookie flow a browser uses, wrong and
// forged credentials, rotation on disk, a bad file kept out, and no token byte in any answer or log line.
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type AdminServer, startAdminServer } from '../../daemons/shared/admin-server.ts';
import { SESSION_COOKIE } from '../../daemons/shared/dashboard-access.ts';
import { DashboardTokenFile } from '../../daemons/shared/dashboard-token-file.ts';
import { capturingLogger, waitFor } from '../gossip-operator/helpers.ts';

const TOKEN = 'dGhpcyBpcyB0aGUgZGFzaGJvYXJk+/token=='; // base64 with '+', '/' and '=', as `openssl rand -base64` prints
const NEXT = 'a-second-token-after-rotation-0123456789';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A Secret volume as the kubelet writes it: dir/..<ts>/token, dir/..data -> ..<ts>, dir/token -> ..data/token. */
function secretVolume(): { dir: string; file: string; rotate(token: string): void } {
  const dir = mkdtempSync(join(tmpdir(), 'agn-dashboard-token-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  let generation = 0;
  const rotate = (token: string): void => {
    generation += 1;
    const version = `..2026_12_03_${generation}`;
    mkdirSync(join(dir, version));
    writeFileSync(join(dir, version, 'token'), `${token}\n`);
    symlinkSync(version, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  return {
    dir,
    file: join(dir, 'token'),
    rotate(token) {
      rotate(token);
      try {
        symlinkSync('..data/token', join(dir, 'token'));
      } catch {
        // Already linked: the swap of ..data is the rotation.
      }
    },
  };
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request with raw headers (fetch would follow redirects and hide Set-Cookie handling). */
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = '';
      const done = () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      if (res.headers['content-type'] === 'text/event-stream') {
        res.once('data', (chunk: Buffer) => {
          body += chunk.toString();
          req.destroy();
          done();
        });
        return;
      }
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', done);
    });
    req.on('error', reject);
    req.end();
  });
}

async function tokenServer(file: string): Promise<{
  server: AdminServer;
  lines: string[];
  answers: Answer[];
  ask: (path: string, headers?: Record<string, string>) => Promise<Answer>;
}> {
  const { logger, lines } = capturingLogger();
  const tokens = new DashboardTokenFile({ file, logger, debounceMs: 20, pollIntervalMs: 200 });
  await tokens.start();
  cleanups.push(() => tokens.close());
  const server = await startAdminServer({
    address: '127.0.0.1:0',
    registry: new Registry(),
    isReady: () => true,
    dashboard: {
      view: async () => ({ site: 'east', generatedAt: 'now' }),
      access: { mode: 'token', token: () => tokens.current() },
    },
  });
  cleanups.push(() => server.close());
  const answers: Answer[] = [];
  const ask = async (path: string, headers: Record<string, string> = {}): Promise<Answer> => {
    const answer = await get(server.port, path, headers);
    answers.push(answer);
    return answer;
  };
  return { server, lines, answers, ask };
}

const cookieOf = (answer: Answer): string => {
  const header = answer.headers['set-cookie'];
  const first = Array.isArray(header) ? header[0] : header;
  return (first ?? '').split(';')[0] ?? '';
};

function expectNoTokenBytes(texts: readonly string[], tokens: readonly string[]): void {
  for (const token of tokens) {
    for (const needle of [token, encodeURIComponent(token), Buffer.from(token).toString('base64')]) {
      expect(texts.filter((t) => t.includes(needle))).toEqual([]);
    }
  }
}

describe('dashboard access with a token', () => {
  it('lets in a bearer token or the session cookie from ?token=, and nobody else; probes and metrics stay open', async () => {
    const volume = secretVolume();
    volume.rotate(TOKEN);
    const { server, lines, answers, ask } = await tokenServer(volume.file);

    const anonymous = await ask('/dashboard/');
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers['www-authenticate']).toBe('Bearer realm="agn fleet dashboard"');
    expect(anonymous.body).toContain('needs its token');
    expect(anonymous.body).toContain('grid-dashboard-token');
    for (const path of ['/dashboard', '/dashboard/model.json', '/dashboard/events', '/dashboard/dashboard.js'])
      expect((await ask(path)).status, path).toBe(401);
    // The admin port's other jobs need no token.
    for (const path of ['/livez', '/readyz', '/metrics']) expect((await ask(path)).status, path).toBe(200);

    expect((await ask('/dashboard/model.json', { authorization: `Bearer ${TOKEN}` })).body).toBe(
      '{"site":"east","generatedAt":"now"}',
    );
    expect((await ask('/dashboard/model.json', { authorization: `bearer ${TOKEN}` })).status).toBe(200);
    for (const wrong of [`Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`, 'Bearer short', `Basic ${TOKEN}`, TOKEN]) {
      expect((await ask('/dashboard/model.json', { authorization: wrong })).status, wrong).toBe(401);
    }

    // The browser flow: ?token= once, a redirect that drops it and sets the cookie; the cookie opens everything.
    const login = await ask(`/dashboard/?token=${encodeURIComponent(TOKEN)}`);
    expect(login.status).toBe(303);
    expect(login.headers['location']).toBe('/dashboard/');
    const setCookie = String(login.headers['set-cookie']);
    expect(setCookie).toMatch(
      new RegExp(`^${SESSION_COOKIE}=[A-Za-z0-9_-]{43}; Path=/dashboard; HttpOnly; SameSite=Strict$`),
    );
    const cookie = cookieOf(login);
    for (const path of ['/dashboard/', '/dashboard/model.json', '/dashboard/dashboard.css'])
      expect((await ask(path, { cookie })).status, path).toBe(200);
    const events = await ask('/dashboard/events', { cookie: `theme=dark; ${cookie}` });
    expect(events.status).toBe(200);
    expect(events.body).toContain('retry: 2000');
    // The token pasted raw (its '+' not encoded), from /dashboard without the slash, other parameters kept.
    expect((await ask(`/dashboard?token=${TOKEN}`)).headers['location']).toBe('/dashboard/');
    expect((await ask(`/dashboard/?view=compact&token=${encodeURIComponent(TOKEN)}`)).headers['location']).toBe(
      '/dashboard/?view=compact',
    );

    // Wrong and forged credentials.
    const wrongLogin = await ask('/dashboard/?token=not-the-token-but-long-enough');
    expect(wrongLogin.status).toBe(401);
    expect(wrongLogin.headers['set-cookie']).toBeUndefined();
    expect((await ask('/dashboard/?token=%E0%A4%A')).status).toBe(401);
    expect(
      (await ask('/dashboard/model.json', { cookie: `${SESSION_COOKIE}=${encodeURIComponent(TOKEN)}` })).status,
    ).toBe(401);
    expect((await ask('/dashboard/model.json', { cookie: `${cookie}x` })).status).toBe(401);
    // A valid cookie does not rescue a wrong bearer token.
    expect(
      (await ask('/dashboard/model.json', { cookie, authorization: 'Bearer not-the-token-but-long-enough' })).status,
    ).toBe(401);

    expect(server.port).toBeGreaterThan(0);
    const everything = [...answers.map((a) => `${JSON.stringify(a.headers)}\n${a.body}`), ...lines];
    expectNoTokenBytes(everything, [TOKEN]);
  });

  it('follows the token file when the Secret is rotated: the old token and its sessions stop, the new one works', async () => {
    const volume = secretVolume();
    volume.rotate(TOKEN);
    const { lines, answers, ask } = await tokenServer(volume.file);
    const cookie = cookieOf(await ask(`/dashboard/?token=${encodeURIComponent(TOKEN)}`));
    expect((await ask('/dashboard/model.json', { cookie })).status).toBe(200);

    volume.rotate(NEXT);
    await waitFor(
      'the rotated token in use',
      async () =>
        (await ask('/dashboard/model.json', { authorization: `Bearer ${NEXT}` })).status === 200 ? true : undefined,
      5_000,
    );
    expect((await ask('/dashboard/model.json', { authorization: `Bearer ${TOKEN}` })).status).toBe(401);
    expect((await ask('/dashboard/model.json', { cookie })).status).toBe(401);
    const fresh = cookieOf(await ask(`/dashboard/?token=${NEXT}`));
    expect(fresh).not.toBe(cookie);
    expect((await ask('/dashboard/', { cookie: fresh })).status).toBe(200);
    expect(lines.some((l) => l.includes('dashboard token changed on disk'))).toBe(true);
    expectNoTokenBytes([...answers.map((a) => `${JSON.stringify(a.headers)}\n${a.body}`), ...lines], [TOKEN, NEXT]);
  });

  it('keeps the last good token when the file turns bad, and lets nobody in before a good one', async () => {
    const volume = secretVolume();
    const { lines, ask } = await tokenServer(volume.file);
    // No file yet: nobody gets in, and the answer says why without a login page that could not work.
    const none = await ask('/dashboard/', { authorization: `Bearer ${TOKEN}` });
    expect(none.status).toBe(503);
    expect(none.body).toContain('the dashboard token is not loaded');
    expect(
      lines.some((l) =>
        l.includes(
          `dashboard token file ${volume.file}: cannot read it (ENOENT); nobody can open the dashboard until it is fixed`,
        ),
      ),
    ).toBe(true);

    volume.rotate(TOKEN);
    await waitFor(
      'the token loaded once its file appears',
      async () => ((await ask('/dashboard/', { authorization: `Bearer ${TOKEN}` })).status === 200 ? true : undefined),
      5_000,
    );

    const weak = 'short-token';
    volume.rotate(weak);
    await waitFor(
      'the short token refused in the log',
      () => (lines.some((l) => l.includes('the token is 11 bytes, at least 16 are needed')) ? true : undefined),
      5_000,
    );
    expect(lines.filter((l) => l.includes('the token is 11 bytes')).length).toBe(1);
    expect(lines.some((l) => l.includes('the token loaded before stays in use'))).toBe(true);
    expect((await ask('/dashboard/', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expect((await ask('/dashboard/', { authorization: `Bearer ${weak}` })).status).toBe(401);

    volume.rotate('has whitespace inside the token text');
    await waitFor(
      'the spaced token refused',
      () => (lines.some((l) => l.includes('whitespace, control or non-ASCII')) ? true : undefined),
      5_000,
    );
    expect((await ask('/dashboard/', { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
    expectNoTokenBytes(lines, [TOKEN, weak, 'has whitespace inside the token text']);
  });
});

describe('dashboard access when open or off', () => {
  it('open serves without credentials; without a dashboard (off) every dashboard path is 404 and /metrics stays', async () => {
    const open = await startAdminServer({
      address: '127.0.0.1:0',
      registry: new Registry(),
      isReady: () => true,
      dashboard: { view: async () => ({}), access: { mode: 'open' } },
    });
    cleanups.push(() => open.close());
    expect((await get(open.port, '/dashboard/model.json')).status).toBe(200);
    const off = await startAdminServer({ address: '127.0.0.1:0', registry: new Registry(), isReady: () => true });
    cleanups.push(() => off.close());
    for (const path of [
      '/dashboard',
      '/dashboard/',
      '/dashboard/?token=x',
      '/dashboard/model.json',
      '/dashboard/events',
    ])
      expect((await get(off.port, path)).status, path).toBe(404);
    expect((await get(off.port, '/metrics')).status).toBe(200);
  });
});
