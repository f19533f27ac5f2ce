import { X509Certificate } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureGridPki } from '../../daemons/local-grid/pki.ts';
import { ensureSwimKey } from '../../daemons/local-grid/secrets.ts';

const dir = mkdtempSync(join(tmpdir(), 'agn-pki-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('local grid PKI', () => {
  it('issues per-site gateway certificates from one grid CA and reuses them on the next start', async () => {
    const first = await ensureGridPki(dir, ['east', 'west']);
    const ca = new X509Certificate(readFileSync(first.caFile));
    for (const site of first.sites) {
      const server = new X509Certificate(readFileSync(site.providerGateway.certFile));
      expect(server.checkIssued(ca)).toBe(true);
      expect(server.verify(ca.publicKey)).toBe(true);
      expect(server.subjectAltName).toContain(`DNS:${site.site}.grid.internal`);
      expect(server.subjectAltName).toContain('IP Address:127.0.0.1');
      const client = new X509Certificate(readFileSync(site.consumerClient.certFile));
      expect(client.subject).toContain(`O=grid-${site.site}`);
      expect(client.verify(ca.publicKey)).toBe(true);
      expect(statSync(site.consumerClient.keyFile).mode & 0o077).toBe(0);
    }
    const second = await ensureGridPki(dir, ['east', 'west']);
    expect(second.sites.map((s) => s.providerGateway.fingerprint)).toEqual(
      first.sites.map((s) => s.providerGateway.fingerprint),
    );
  });

  it('signs a site added later with the same CA', async () => {
    await ensureGridPki(dir, ['east']);
    const later = await ensureGridPki(dir, ['east', 'north']);
    const ca = new X509Certificate(readFileSync(later.caFile));
    const north = new X509Certificate(readFileSync(later.sites[1]!.providerGateway.certFile));
    expect(north.verify(ca.publicKey)).toBe(true);
  });

  it('keeps every key file owner-only (0600, directories 0700), tightening keys an earlier start left readable', async () => {
    const keyDir = join(dir, 'modes');
    const pki = await ensureGridPki(keyDir, ['east']);
    const swim = ensureSwimKey(keyDir);
    const east = pki.sites[0]!;
    const keys = [
      join(keyDir, 'ca.key'),
      join(keyDir, 'swim.key'),
      east.providerGateway.keyFile,
      east.consumerClient.keyFile,
      east.siteIdentity.keyFile,
    ];
    const mode = (path: string) => statSync(path).mode & 0o777;
    for (const key of keys) expect(mode(key), key).toBe(0o600);
    expect(mode(keyDir)).toBe(0o700);
    expect(mode(join(keyDir, 'east'))).toBe(0o700);
    // A state directory copied with wider modes (cp without -p, an older version, a careless chmod): the next start
    // reuses the keys and tightens them.
    for (const key of keys) chmodSync(key, 0o644);
    chmodSync(keyDir, 0o755);
    chmodSync(join(keyDir, 'east'), 0o755);
    const again = await ensureGridPki(keyDir, ['east']);
    expect(ensureSwimKey(keyDir).equals(swim)).toBe(true);
    expect(again.sites[0]!.providerGateway.fingerprint).toBe(east.providerGateway.fingerprint);
    for (const key of keys) expect(mode(key), key).toBe(0o600);
    expect(mode(keyDir)).toBe(0o700);
    expect(mode(join(keyDir, 'east'))).toBe(0o700);
  });
});
