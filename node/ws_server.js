'use strict';
// Ping-pong relay server on the `ws` library (WebSocketServer, as ws's README shows).

const requireDependency = require('./dependencies');
const { WebSocketServer, WebSocket } = requireDependency('ws');
const { parseServerArgs, writeServerInfo } = require('./server_support');

const args = parseServerArgs('ws_server.js', ['auto', 'libuv']);
// ws's server refuses permessage-deflate unless perMessageDeflate is set: 'default' and 'off' are the same.
const settings = { compression: args.compression, compression_effective: args.compression === 'on', tls: Boolean(args.tlsCert) };
const rooms = new Map();
// TLS: an https.Server carries the WebSocketServer, as ws's README shows for wss://.
const httpsServer = args.tlsCert ? require('https').createServer({
  cert: require('fs').readFileSync(args.tlsCert), key: require('fs').readFileSync(args.tlsKey),
}) : null;
const server = httpsServer
  ? new WebSocketServer({ server: httpsServer, perMessageDeflate: settings.compression_effective })
  : new WebSocketServer({ host: args.host, port: args.port, perMessageDeflate: settings.compression_effective });
if (httpsServer) httpsServer.listen(args.port, args.host, () => server.emit('listening'));

server.on('connection', (socket, request) => {
  const room = (request.url || '/').split('?')[0] || '/';
  if (!rooms.has(room)) rooms.set(room, new Set());
  const members = rooms.get(room);
  members.add(socket);
  socket.on('message', (data, isBinary) => {
    for (const other of members) {
      if (other !== socket && other.readyState === WebSocket.OPEN) other.send(data, { binary: isBinary });
    }
  });
  socket.on('close', () => members.delete(socket));
  socket.on('error', () => members.delete(socket));
});

server.on('listening', () => {
  writeServerInfo({
    implementation: 'node-ws',
    runtime: { name: 'node', version: process.versions.node },
    libraries: { ws: requireDependency('ws/package.json').version },
    loop_requested: args.loop,
    loop: 'libuv',
    settings,
  });
  process.stderr.write(`node-ws server listening on ${args.host}:${args.port}\n`);
});

(httpsServer || server).on('error', (error) => {
  process.stderr.write(`node-ws server: ${error.message}\n`);
  process.exit(1);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    for (const socket of server.clients) socket.terminate();
    server.close(() => (httpsServer ? httpsServer.close(() => process.exit(0)) : process.exit(0)));
  });
}
