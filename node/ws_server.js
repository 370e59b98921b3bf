'use strict';
// Ping-pong relay server on the `ws` library (WebSocketServer, as ws's README shows).

const fs = require('fs');
const { parseArgs } = require('util');
const { WebSocketServer, WebSocket } = require('ws');

const USAGE = 'usage: ws_server.js --host H --port P [--loop auto] [--compression default|off|on]';

function parseServerArgs() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string' },
        loop: { type: 'string', default: 'auto' },
        compression: { type: 'string', default: 'default' },
      },
    }));
  } catch (error) {
    process.stderr.write(`${error.message}\n${USAGE}\n`);
    process.exit(2);
  }
  const port = Number(values.port);
  const problems = [];
  if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push('--port must be an integer 0-65535');
  if (!['auto', 'libuv'].includes(values.loop)) problems.push(`--loop ${values.loop} is not available in Node.js (use auto)`);
  if (!['default', 'off', 'on'].includes(values.compression)) problems.push('--compression must be default, off or on');
  if (problems.length) {
    process.stderr.write(`${problems.join('; ')}\n${USAGE}\n`);
    process.exit(2);
  }
  return { host: values.host, port, loop: values.loop, compression: values.compression };
}

const args = parseServerArgs();
// ws's server refuses permessage-deflate unless perMessageDeflate is set: 'default' and 'off' are the same.
const settings = { compression: args.compression, compression_effective: args.compression === 'on' };
const rooms = new Map();
const server = new WebSocketServer({ host: args.host, port: args.port, perMessageDeflate: settings.compression_effective });

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
  if (process.env.PINGPONG_INFO_FILE) {
    const info = {
      format_version: 1,
      role: 'server',
      implementation: 'node-ws',
      pid: process.pid,
      runtime: { name: 'node', version: process.versions.node },
      libraries: { ws: require('ws/package.json').version },
      loop_requested: args.loop,
      loop: 'libuv',
      settings,
    };
    const temporary = `${process.env.PINGPONG_INFO_FILE}.${process.pid}.tmp`;
    fs.writeFileSync(temporary, JSON.stringify(info));
    fs.renameSync(temporary, process.env.PINGPONG_INFO_FILE);
  }
  process.stderr.write(`node-ws server listening on ${args.host}:${args.port}\n`);
});

server.on('error', (error) => {
  process.stderr.write(`node-ws server: ${error.message}\n`);
  process.exit(1);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    for (const socket of server.clients) socket.terminate();
    server.close(() => process.exit(0));
  });
}
