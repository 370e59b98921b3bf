'use strict';
// The Node.js floor: the same relay as the WebSocket servers over plain TCP, on Node's net module, TCP_NODELAY on
// every connection. Wire format in node/raw_tcp.js (length-prefixed frames, the first naming the room).

const net = require('net');
const { floorSettings, relayConnection } = require('./raw_tcp');
const { parseServerArgs, writeServerInfo } = require('./server_support');

const args = parseServerArgs('raw_tcp_server.js', ['auto', 'libuv'], { compression: ['default', 'off'], tls: false });
const rooms = new Map();
const sockets = new Set();

const server = net.createServer({ noDelay: true }, (socket) => {
  socket.setNoDelay(true);
  sockets.add(socket);
  const connection = relayConnection(rooms, socket, () => socket.destroy());
  socket.on('data', (chunk) => connection.feed(chunk));
  socket.on('error', () => {}); // a reset by the peer; 'close' follows
  socket.on('close', () => {
    connection.leave();
    sockets.delete(socket);
  });
});

server.listen(args.port, args.host, () => {
  writeServerInfo({
    implementation: 'raw-tcp-node',
    runtime: { name: 'node', version: process.versions.node },
    libraries: {},
    loop_requested: args.loop,
    loop: 'libuv',
    settings: { compression: args.compression, tls: false, ...floorSettings() },
  });
  process.stderr.write(`raw TCP Node.js server listening on ${args.host}:${server.address().port}\n`);
});

server.on('error', (error) => {
  process.stderr.write(`raw-tcp-node server: ${error.message}\n`);
  process.exit(1);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    for (const socket of sockets) socket.destroy();
    server.close(() => process.exit(0));
  });
}
