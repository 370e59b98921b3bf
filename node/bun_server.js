'use strict';
// Ping-pong relay server on Bun.serve's native WebSocket support. Rooms are Bun's pub/sub topics: ws.publish()
// sends to every subscriber of the topic except the sender, as Bun's documentation shows.

const { parseServerArgs, writeServerInfo } = require('./server_support');

const args = parseServerArgs('bun_server.js', ['auto', 'bun']);
// Bun.serve's websocket.perMessageDeflate is false unless set: 'default' and 'off' are the same.
const settings = {
  compression: args.compression, compression_effective: args.compression === 'on', idle_timeout: 0, tls: Boolean(args.tlsCert),
};

const server = Bun.serve({
  hostname: args.host,
  port: args.port,
  tls: args.tlsCert ? { cert: Bun.file(args.tlsCert), key: Bun.file(args.tlsKey) } : undefined,
  fetch(request, bunServer) {
    const room = new URL(request.url).pathname || '/';
    if (bunServer.upgrade(request, { data: { room } })) return undefined;
    return new Response('this server only speaks WebSocket', { status: 426 });
  },
  websocket: {
    perMessageDeflate: settings.compression_effective,
    idleTimeout: 0,
    open(socket) {
      socket.subscribe(socket.data.room);
    },
    message(socket, message) {
      socket.publish(socket.data.room, message);
    },
    close(socket) {
      socket.unsubscribe(socket.data.room);
    },
  },
});

writeServerInfo({
  implementation: 'bun',
  runtime: { name: 'bun', version: Bun.version },
  libraries: { bun: Bun.version },
  loop_requested: args.loop,
  loop: 'bun',
  settings,
});
process.stderr.write(`bun server listening on ${args.host}:${server.port}\n`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.stop(true);
    process.exit(0);
  });
}
