// A loopback port that refuses connections, for the dead endpoints of tests. Chosen among ports 600-999: the kernel
// never hands those out to a bind to port 0 or to an outgoing connection, and the local grid picks from 10000 up, so
// no other test starts listening there between the choice and its use. A port taken by binding port 0 and releasing
// it could be: CI once saw a gateway's dead endpoint fail with UND_ERR_SOCKET (a connection accepted, then closed)
// instead of ECONNREFUSED, most likely another test's listener on the released number.
import { connect } from 'node:net';

export async function closedPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 600 + Math.floor(Math.random() * 400);
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
    });
    if (refused) return port;
  }
  throw new Error('no port among 600-999 refused a connection after 50 attempts');
}
