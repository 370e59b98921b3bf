'use strict';
// The Bun floor's client driver: the shared ping-pong measurement (node/driver/) over plain TCP, on Bun's native
// TCP API (Bun.connect), TCP_NODELAY on both connections. The URL is tcp://HOST:PORT/ROOM; wire format in
// node/raw_tcp.js. Bun's socket.write() may take part of a frame: the rest waits for drain (PartialWriter).

const driver = require('./driver');
const { ClientConnection, PartialWriter, floorSettings, parseTcpUrl, socketDetails } = require('./raw_tcp');

async function openConnection(url, args, onError) {
  const { host, port, room } = parseTcpUrl(url);
  let connection = null;
  let writer = null;
  let socket;
  try {
    socket = await Bun.connect({
      hostname: host,
      port,
      socket: {
        data: (_, chunk) => connection.feed(chunk),
        drain: () => writer.flush(),
        close: (_, error) => connection && connection.closed(error || null),
        error: (_, error) => connection && connection.closed(error),
      },
    });
  } catch (error) {
    throw new Error(`cannot connect to ${url}: ${error.message}`);
  }
  if (!socket.setNoDelay(true)) throw new Error('could not set TCP_NODELAY');
  writer = new PartialWriter((data) => socket.write(data));
  connection = new ClientConnection(room, args.payloadKind === 'binary', {
    write: (data) => writer.write(data),
    end: () => socket.end(),
    details: () => socketDetails(socket, 'not readable in Bun; socket.setNoDelay(true) reported success'),
  });
  return connection.open(onError);
}

driver.main({
  implementation: 'raw-tcp-bun',
  libraries: {},
  openConnection,
  settings: floorSettings,
  supported: { compression: ['default', 'off'], tls: false },
});
