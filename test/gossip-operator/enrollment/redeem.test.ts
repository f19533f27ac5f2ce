// The SiteInvite redeem endpoint end to end: a real operator on a real local store serving HTTPS on 127.0.0.1,
// real grid CA, real CSRs. A redeemed token issues one site certificate that peers accept through the same chain
// check the operator uses (site-identity.ts); every refusal has its code and status, leaves the token usable, and
// no token byte reaches status, logs, error bodies or metrics.
import { X509Certificate } from 'node:crypto';
import { request } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { certifiedIdentity, verifySiteBundle } from '../../../daemons/gossip-operator/site-identity.ts';
import {
  InviteRedeemer,
  parseRedeemRequest,
  RedeemRefusal,
  REDEEM_OUTCOMES,
} from '../../../daemons/gossip-operator/enrollment/redeem.ts';
import { loadGridCa } from '../../../daemons/gossip-operator/enrollment/site-certificate.ts';
import { grid, readStateObject, schemaProblems, waitFor } from '../helpers.ts';
import { REDEEM_PATH } from '../../../schemas/enrollment/protocol.ts';
import {
  call,
  CERT_LIFETIME_MS,
  createInvite,
  csrFor,
  type IssuedInvite,
  redeem,
  SIGNER,
  type Signer,
  siteKeys,
  startSigner,
} from './helpers.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

describe('SiteInvite redeem endpoint', () => {
  let signer: Signer;
  const tokens: string[] = [];
  const bodies: string[] = [];
  const invite = async (name: string, spec: Record<string, unknown>): Promise<IssuedInvite> => {
    const issued = await createInvite(signer, name, spec);
    tokens.push(issued.token);
    return issued;
  };
  const send = async (fields: Record<string, unknown>) => {
    const reply = await redeem(signer, fields);
    bodies.push(reply.text);
    return reply;
  };

  beforeAll(async () => {
    signer = await startSigner('enroll');
  });
  afterAll(async () => {
    await signer?.stop();
  });

  it('issues a grid-CA site certificate for the CSR key that peers accept, and records the redemption', async () => {
    const east2 = await invite('east2', { siteName: 'east2', jurisdictions: ['eu-west'] });
    const keys = await siteKeys();
    const reply = await send({
      tokenId: east2.tokenId,
      token: east2.token,
      siteName: 'east2',
      csr: await csrFor(keys, 'ignored-name'),
    });
    expect(reply.status, reply.text).toBe(200);
    const cert = new X509Certificate(reply.json.certificate);
    // Names come from the invite, not from the CSR's subject.
    expect(cert.subject.split('\n')).toContain('CN=east2');
    expect(cert.subjectAltName).toBe('DNS:east2');
    expect(cert.keyUsage).toEqual(expect.arrayContaining(['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']));
    expect(cert.ca).toBe(false);
    expect(cert.publicKey.export({ type: 'spki', format: 'der' }).equals(keys.spki)).toBe(true);
    expect(cert.checkIssued(new X509Certificate(signer.files.ca.certPem))).toBe(true);
    const lifetime = Date.parse(cert.validTo) - Date.now();
    expect(lifetime).toBeGreaterThan(CERT_LIFETIME_MS - 120_000);
    expect(lifetime).toBeLessThanOrEqual(CERT_LIFETIME_MS);
    expect(reply.json.caCertificate).toBe(signer.files.ca.certPem);
    expect(reply.json.chain).toBe(reply.json.certificate + signer.files.ca.certPem);
    expect(reply.json.publicKeySHA256).toBe(keys.publicKeySHA256);

    // The peer chain check: grid CA -> this site certificate naming east2 -> a signing certificate it certifies.
    const identity = await certifiedIdentity('east2', reply.json.certificate, keys.keyPem);
    const check = verifySiteBundle(identity.certificateBundle ?? '', 'east2', signer.files.ca.certPem, Date.now());
    expect(check).toMatchObject({ ok: true });
    expect(
      verifySiteBundle(identity.certificateBundle ?? '', 'east3', signer.files.ca.certPem, Date.now()),
    ).toMatchObject({ ok: false });

    const status: Json = (await grid(signer.state, 'SiteInvite', 'east2')).status;
    expect(status).toMatchObject({
      redeemed: true,
      redeemedBy: 'east2',
      redeemedPublicKeySHA256: keys.publicKeySHA256,
    });
    expect(Math.abs(Date.parse(status.redeemedAt) - Date.now())).toBeLessThan(60_000);
    expect(await readStateObject(signer.state, 'core', 'Secret', 'grid-system', 'grid-invite-east2')).toBeUndefined();
    await waitFor('the Redeemed Ready condition', async () => {
      const s: Json = (await grid(signer.state, 'SiteInvite', 'east2')).status;
      return s.conditions?.some((c: Json) => c.type === 'Ready' && c.reason === 'Redeemed') ? true : undefined;
    });
    expect(await schemaProblems(signer.state)).toEqual([]);

    // One-time: the same token again is refused, and nothing new is issued.
    const again = await send({
      tokenId: east2.tokenId,
      token: east2.token,
      siteName: 'east2',
      csr: await csrFor(keys),
    });
    expect(again.status).toBe(409);
    expect(again.json).toMatchObject({ error: 'already_redeemed' });
  });

  it('refuses each bad request with its code and status, without spending the token', async () => {
    const inv = await invite('west1', { siteName: 'west1' });
    const keys = await siteKeys();
    const csr = await csrFor(keys);
    const good = { tokenId: inv.tokenId, token: inv.token, siteName: 'west1', csr };
    const cases: Array<[string, Record<string, unknown>, number, string]> = [
      ['unknown token id', { ...good, tokenId: 'ffffffffffffffff' }, 401, 'unknown_token'],
      [
        'wrong token',
        { ...good, token: `${inv.token.slice(0, -1)}${inv.token.endsWith('A') ? 'B' : 'A'}` },
        401,
        'wrong_token',
      ],
      ['empty token', { ...good, token: '' }, 400, 'malformed_request'],
      ['site name not the invited one', { ...good, siteName: 'west2' }, 403, 'site_name_mismatch'],
      ['site name not a DNS label', { ...good, siteName: 'West_1' }, 400, 'malformed_request'],
      ['missing csr', { tokenId: good.tokenId, token: good.token, siteName: good.siteName }, 400, 'malformed_request'],
      ['unknown field', { ...good, privateKey: 'x' }, 400, 'malformed_request'],
      ['csr not PEM', { ...good, csr: 'hello' }, 400, 'invalid_csr'],
      ['csr signed by another key', { ...good, csr: tamperCsr(csr) }, 400, 'invalid_csr'],
      ['token id with bad characters', { ...good, tokenId: '../x' }, 400, 'malformed_request'],
      ['token pasted as the token id', { ...good, tokenId: inv.token }, 400, 'malformed_request'],
    ];
    for (const [what, body, status, code] of cases) {
      const reply = await send(body);
      expect({ what, status: reply.status, code: reply.json?.error }).toEqual({ what, status, code });
      expect(typeof reply.json.message).toBe('string');
      expect(reply.json.message.length).toBeLessThan(300);
      // No refusal repeats a secret it was sent, whichever field it came in.
      expect(reply.text, what).not.toContain(inv.token);
      if (what === 'csr signed by another key') expect(reply.json.message).toContain('signature does not verify');
    }
    for (const raw of ['{not json', '[1,2]', '"text"', '\u00ff']) {
      const reply = await call(signer, raw);
      bodies.push(reply.text);
      expect(reply.status).toBe(400);
      expect(reply.json.error).toBe('malformed_request');
    }
    const tooLarge = await call(signer, JSON.stringify({ ...good, csr: 'x'.repeat(40_000) }));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.json.error).toBe('payload_too_large');
    // Without a content-length the limit applies while reading the chunked body.
    const chunked = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: signer.port,
          method: 'POST',
          path: REDEEM_PATH,
          ca: signer.files.ca.certPem,
          servername: SIGNER,
          agent: false,
        },
        (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.write(JSON.stringify({ ...good, csr: 'x'.repeat(20_000) }));
      req.end('x'.repeat(20_000));
    });
    expect(chunked.status).toBe(413);
    expect(JSON.parse(chunked.text).error).toBe('payload_too_large');
    const get = await call(signer, '', { method: 'GET' });
    expect(get.status).toBe(405);
    const other = await call(signer, '{}', { path: '/v1/other' });
    expect(other.status).toBe(404);

    // None of that spent the token.
    const reply = await send(good);
    expect(reply.status, reply.text).toBe(200);
  });

  it('issues at most one certificate for concurrent redeems of one token', async () => {
    const inv = await invite('race', { siteName: 'race' });
    const attempts = await Promise.all(
      Array.from({ length: 5 }, async () =>
        send({ tokenId: inv.tokenId, token: inv.token, siteName: 'race', csr: await csrFor(await siteKeys()) }),
      ),
    );
    const statuses = attempts.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    for (const a of attempts.filter((x) => x.status !== 200))
      expect(['already_redeemed', 'revoked']).toContain(a.json.error);
    const winner = attempts.find((a) => a.status === 200);
    const status: Json = (await grid(signer.state, 'SiteInvite', 'race')).status;
    expect(status.redeemedPublicKeySHA256).toBe(winner?.json.publicKeySHA256);
  });

  it('lets only one of two replicas sharing the store redeem a token (the token Secret delete is the claim)', async () => {
    const inv = await invite('replicas', { siteName: 'replicas' });
    const ca = await loadGridCa(signer.files.ca.certPem, signer.files.ca.keyPem, { cert: 'ca.crt', key: 'ca.key' });
    const replica = () =>
      new InviteRedeemer({
        store: signer.op.store,
        namespace: 'grid-system',
        ca: () => ca,
        certificateLifetimeMs: 3_600_000 * 2,
        now: Date.now,
      });
    const replicas = [replica(), replica()];
    const results = await Promise.allSettled(
      Array.from({ length: 6 }, async (_, i) =>
        (replicas[i % 2] as InviteRedeemer).redeem(
          parseRedeemRequest(
            Buffer.from(
              JSON.stringify({
                tokenId: inv.tokenId,
                token: inv.token,
                siteName: 'replicas',
                csr: await csrFor(await siteKeys()),
              }),
            ),
          ),
        ),
      ),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(RedeemRefusal);
  });

  it('refuses an expired token', async () => {
    const inv = await invite('short', { siteName: 'short', lifetime: '5m' });
    signer.skewMs = 5 * 60_000 + 1_000;
    try {
      const reply = await send({
        tokenId: inv.tokenId,
        token: inv.token,
        siteName: 'short',
        csr: await csrFor(await siteKeys()),
      });
      expect(reply.status).toBe(410);
      expect(reply.json.error).toBe('expired');
    } finally {
      signer.skewMs = 0;
    }
    expect((await grid(signer.state, 'SiteInvite', 'short')).status.redeemed).toBe(false);
  });

  it('enforces the key binding: only the CSR of the bound key redeems', async () => {
    const bound = await siteKeys();
    const inv = await invite('bound', { siteName: 'bound', publicKeySHA256: bound.publicKeySHA256 });
    const other = await siteKeys();
    const refused = await send({ tokenId: inv.tokenId, token: inv.token, siteName: 'bound', csr: await csrFor(other) });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toBe('key_mismatch');
    expect(refused.json.message).toContain(other.publicKeySHA256);
    const accepted = await send({
      tokenId: inv.tokenId,
      token: inv.token,
      siteName: 'bound',
      csr: await csrFor(bound),
    });
    expect(accepted.status, accepted.text).toBe(200);
    expect((await grid(signer.state, 'SiteInvite', 'bound')).status.redeemedPublicKeySHA256).toBe(
      bound.publicKeySHA256,
    );
  });

  it('counts attempts by outcome and never lets a token reach status, logs, error bodies or metrics', async () => {
    const metrics = await signer.op.operator.metrics.registry.metrics();
    const count = (outcome: string) =>
      Number(new RegExp(`grid_enrollment_redeem_total\\{outcome="${outcome}"\\} (\\d+)`).exec(metrics)?.[1]);
    expect(count('issued')).toBe(4);
    expect(count('key_mismatch')).toBe(1);
    expect(count('expired')).toBe(1);
    expect(count('wrong_token')).toBe(1);
    expect(count('payload_too_large')).toBe(2);
    expect(count('internal_error')).toBe(0);
    const outcomes = [...metrics.matchAll(/grid_enrollment_redeem_total\{outcome="([a-z_]+)"\}/g)].map((m) => m[1]);
    expect(new Set(outcomes)).toEqual(new Set(REDEEM_OUTCOMES));

    expect(tokens.length).toBeGreaterThanOrEqual(6);
    const statuses = await Promise.all(
      ['east2', 'west1', 'race', 'replicas', 'short', 'bound'].map(async (n) =>
        JSON.stringify(await grid(signer.state, 'SiteInvite', n)),
      ),
    );
    // A 16-character piece is enough to find the token (or a near miss of it, as the wrong-token case sends)
    // echoed anywhere; 96 random bits cannot match by chance.
    const pieces = tokens.flatMap((t) => [t.slice(0, 16), t.slice(16, 32)]);
    for (const piece of pieces) {
      for (const line of signer.op.lines) expect(line).not.toContain(piece);
      for (const body of bodies) expect(body).not.toContain(piece);
      for (const status of statuses) expect(status).not.toContain(piece);
      expect(metrics).not.toContain(piece);
    }
    // The log does say what happened, by token id.
    expect(signer.op.lines.some((l) => l.includes('"outcome":"issued"') && l.includes('"siteName":"east2"'))).toBe(
      true,
    );
    expect(signer.op.lines.some((l) => l.includes('"outcome":"wrong_token"'))).toBe(true);
  });
});

/** The CSR with one byte of its signature flipped: still parseable, no longer proof of possession. */
function tamperCsr(pem: string): string {
  const der = Buffer.from(pem.replace(/-----[^-]+-----/g, '').replace(/\s+/g, ''), 'base64');
  const index = der.length - 5;
  der[index] = (der[index] ?? 0) ^ 0x01;
  const body = der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE REQUEST-----\n${body}\n-----END CERTIFICATE REQUEST-----\n`;
}
