/**
 * The peer signals endpoint: GET /v1/signals over HTTPS, presenting this site's certificate and accepting only
 * clients with a grid-CA certificate. It starts without TLS material (every handshake fails) and takes the
 * material when the GridNetwork's Secrets can be read, and again whenever they change (certificate rotation).
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { parseListenAddress } from '../../shared/admin-server.ts';
import type { PeerSignalsDocument } from '../../../schemas/generated/peer-signals.ts';
import { PEER_SIGNALS_PATH, type TlsMaterial } from '../../shared/signals-client.ts';
import { listen } from '../../shared/listen.ts';
import { closeServer } from '../../shared/close-server.ts';

export interface PeerSignalsServerOptions {
  /** host:port; port 0 picks a free port. */
  readonly address: string;
  /** The document to serve, or undefined while this site has nothing to serve (503). */
  readonly document: () => PeerSignalsDocument | undefined;
}

export class PeerSignalsServer {
  readonly #server: Server;
  #material: TlsMaterial | undefined;
  readonly host: string;
  readonly port: number;

  private constructor(server: Server, host: string, port: number) {
    this.#server = server;
    this.host = host;
    this.port = port;
  }

  static async start(options: PeerSignalsServerOptions): Promise<PeerSignalsServer> {
    const { host, port } = parseListenAddress(options.address);
    const server = createServer({ requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.2' }, (req, res) => {
      const send = (status: number, body: string, type = 'text/plain; charset=utf-8') => {
        res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
        res.end(body);
      };
      if ((req.url ?? '').split('?')[0] !== PEER_SIGNALS_PATH) return send(404, 'not found\n');
      if (req.method !== 'GET') return send(405, 'method not allowed\n');
      const document = options.document();
      if (document === undefined) return send(503, 'no signals to serve yet\n');
      send(200, JSON.stringify(document), 'application/json');
    });
    // A failed handshake (no or untrusted client certificate, or no material yet) is the client's problem.
    server.on('tlsClientError', () => {});
    server.headersTimeout = 5_000;
    server.requestTimeout = 10_000;
    await listen(server, port, host);
    return new PeerSignalsServer(server, host, (server.address() as AddressInfo).port);
  }

  /** host:port peers can dial when the listener is bound to a specific address. */
  get boundAddress(): string {
    return this.host.includes(':') ? `[${this.host}]:${this.port}` : `${this.host}:${this.port}`;
  }

  get secure(): boolean {
    return this.#material !== undefined;
  }

  /** Installs (or rotates) the TLS material; unchanged material is a no-op. Throws on unusable PEM. */
  useMaterial(material: TlsMaterial): void {
    const m = this.#material;
    if (m !== undefined && m.caPem === material.caPem && m.certPem === material.certPem && m.keyPem === material.keyPem)
      return;
    this.#server.setSecureContext({ ca: material.caPem, cert: material.certPem, key: material.keyPem });
    this.#material = material;
  }

  close(): Promise<void> {
    return closeServer(this.#server);
  }
}
