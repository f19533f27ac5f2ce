import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureGridPki } from '../../daemons/local-grid/pki.ts';

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
    expect(second.sites.map((s) => s.providerGateway.fingerprint)).toEqual(first.sites.map((s) => s.providerGateway.fingerprint));
  });

  it('signs a site added later with the same CA', async () => {
    await ensureGridPki(dir, ['east']);
    const later = await ensureGridPki(dir, ['east', 'north']);
    const ca = new X509Certificate(readFileSync(later.caFile));
    const north = new X509Certificate(readFileSync(later.sites[1]!.providerGateway.certFile));
    expect(north.verify(ca.publicKey)).toBe(true);
  });
});
