// A Service as kube-proxy's userspace mode made it: a ClusterIP (an address added to the podman bridge) listening on
// each Service port, forwarding every TCP connection to an endpoint (a selected pod's IP and target port), the next
// one when a connect fails. Containers reach Services by the names the compiled configs use, mapped to the ClusterIP
// in each pod's /etc/hosts; nothing in a container's spec is rewritten for it. A LoadBalancer's address is served the
// same way, with startUdpForwarder for its UDP ports.
import { createSocket } from 'node:dgram';
import { createConnection, createServer, type Server, type Socket } from 'node:net';

export interface Endpoint {
  readonly host: string;
  readonly port: number;
}

export interface ServiceProxy {
  readonly address: string;
  readonly port: number;
  close(): Promise<void>;
}

function connectFirst(
  endpoints: readonly Endpoint[],
  start: number,
  done: (socket: Socket | undefined) => void,
  tried = 0,
): void {
  if (tried >= endpoints.length) {
    done(undefined);
    return;
  }
  const endpoint = endpoints[(start + tried) % endpoints.length] as Endpoint;
  const upstream = createConnection({ host: endpoint.host, port: endpoint.port, timeout: 2000 });
  const fail = (): void => {
    upstream.destroy();
    connectFirst(endpoints, start, done, tried + 1);
  };
  upstream.once('error', fail);
  upstream.once('timeout', fail);
  upstream.once('connect', () => {
    upstream.off('error', fail);
    upstream.off('timeout', fail);
    upstream.setTimeout(0);
    done(upstream);
  });
}

export function startServiceProxy(
  address: string,
  port: number,
  endpoints: () => readonly Endpoint[],
): Promise<ServiceProxy> {
  let next = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    const list = endpoints();
    connectFirst(list, next++, (upstream) => {
      if (upstream === undefined) return void client.destroy();
      sockets.add(upstream);
      upstream.once('close', () => sockets.delete(upstream));
      upstream.on('error', () => client.destroy());
      client.on('close', () => upstream.destroy());
      upstream.on('close', () => client.destroy());
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => {
      resolve({
        address,
        port,
        close: () =>
          new Promise<void>((done) => {
            for (const socket of sockets) socket.destroy();
            server.close(() => done());
          }),
      });
    });
  });
}

/**
 * A UDP port of a load balancer: every datagram to `address:port` goes on to the first endpoint. Enough for SWIM,
 * whose members answer the address a peer advertises, never the datagram's source.
 */
export function startUdpForwarder(
  address: string,
  port: number,
  endpoints: () => readonly Endpoint[],
): Promise<ServiceProxy> {
  const socket = createSocket('udp4');
  socket.on('message', (message) => {
    const [endpoint] = endpoints();
    if (endpoint !== undefined) socket.send(message, endpoint.port, endpoint.host);
  });
  socket.on('error', () => undefined);
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(port, address, () => {
      resolve({ address, port, close: () => new Promise<void>((done) => socket.close(() => done())) });
    });
  });
}
