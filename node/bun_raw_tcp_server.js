'use strict';
// The Bun floor: the same relay as the WebSocket servers over plain TCP, on Bun's native TCP API (Bun.listen, one
// set of handlers for every socket, as Bun's documentation shows), TCP_NODELAY on every connection. Wire format in
// node/raw_tcp.js. Bun's socket.write() takes what the kernel accepts and returns its length: the rest waits for
// the drain handler (PartialWriter).

const { PartialWriter, floorSettings, relayConnection } = require('./raw_tcp');
const { parseServerArgs, writeServerInfo } = require('./server_support');

const args = parseServerArgs('bun_raw_tcp_server.js', ['auto', 'bun'], { compression: ['default', 'off'], tls: false });
const rooms = new Map();
const sockets = new Set();

const listener = Bun.listen({
  hostname: args.host,
  port: args.port,
  socket: {
    open(socket) {
      if (!socket.setNoDelay(true)) process.stderr.write('raw-tcp-bun server: could not set TCP_NODELAY\n');
      const writer = new PartialWriter((data) => socket.write(data));
      socket.data = { writer, connection: relayConnection(rooms, writer, () => socket.terminate()) };
      sockets.add(socket);
    },
    data(socket, chunk) {
      socket.data.connection.feed(chunk);
    },
    drain(socket) {
      socket.data.writer.flush();
    },
    close(socket) {
      socket.data.connection.leave();
      sockets.delete(socket);
    },
    error(socket, error) {
      process.stderr.write(`raw-tcp-bun server: ${error.message}\n`);
    },
  },
});

writeServerInfo({
  implementation: 'raw-tcp-bun',
  runtime: { name: 'bun', version: Bun.version },
  libraries: {},
  loop_requested: args.loop,
  loop: 'bun',
  settings: { compression: args.compression, tls: false, ...floorSettings() },
});
process.stderr.write(`raw TCP Bun server listening on ${args.host}:${listener.port}\n`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    for (const socket of sockets) socket.terminate();
    listener.stop(true);
    process.exit(0);
  });
}
