'use strict';
// The Node.js floor's client driver: the shared ping-pong measurement (node/driver/) over plain TCP, on Node's
// net module, TCP_NODELAY on both connections. The URL is tcp://HOST:PORT/ROOM; wire format in node/raw_tcp.js.

const net = require('net');
const driver = require('./driver');
const { ClientConnection, floorSettings, parseTcpUrl, socketDetails } = require('./raw_tcp');

function openConnection(url, args, onError) {
  const { host, port, room } = parseTcpUrl(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port, noDelay: true });
    socket.once('error', (error) => reject(new Error(`cannot connect to ${url}: ${error.message}`)));
    socket.once('connect', () => {
      socket.setNoDelay(true);
      const connection = new ClientConnection(room, args.payloadKind === 'binary', {
        write: (data) => socket.write(data),
        end: () => socket.end(),
        details: () => socketDetails(socket, 'not readable in Node.js; set with socket.setNoDelay(true)'),
      });
      socket.removeAllListeners('error');
      socket.on('error', (error) => connection.closed(error));
      socket.on('close', () => connection.closed(null));
      socket.on('data', (chunk) => connection.feed(chunk));
      connection.open(onError).then(resolve, reject);
    });
  });
}

driver.main({
  implementation: 'raw-tcp-node',
  libraries: {},
  openConnection,
  settings: floorSettings,
  supported: { compression: ['default', 'off'], tls: false },
});
