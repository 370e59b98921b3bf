'use strict';
// Ping-pong relay server on Bun.serve's native WebSocket support. Rooms are Bun's pub/sub topics: ws.publish()
// sends to every subscriber of the topic except the sender, as Bun's documentation shows.

const fs = require('fs');
const { parseArgs } = require('util');

const USAGE = 'usage: bun bun_server.js --host H --port P [--loop auto] [--compression default|off|on]';

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
  if (!['auto', 'bun'].includes(values.loop)) problems.push(`--loop ${values.loop} is not available in Bun (use auto)`);
  if (!['default', 'off', 'on'].includes(values.compression)) problems.push('--compression must be default, off or on');
  if (problems.length) {
    process.stderr.write(`${problems.join('; ')}\n${USAGE}\n`);
    process.exit(2);
  }
  return { host: values.host, port, loop: values.loop, compression: values.compression };
}

const args = parseServerArgs();
// Bun.serve's websocket.perMessageDeflate is false unless set: 'default' and 'off' are the same.
const settings = { compression: args.compression, compression_effective: args.compression === 'on', idle_timeout: 0 };

const server = Bun.serve({
  hostname: args.host,
  port: args.port,
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

if (process.env.PINGPONG_INFO_FILE) {
  const info = {
    format_version: 1,
    role: 'server',
    implementation: 'bun',
    pid: process.pid,
    runtime: { name: 'bun', version: Bun.version },
    libraries: { bun: Bun.version },
    loop_requested: args.loop,
    loop: 'bun',
    settings,
  };
  const temporary = `${process.env.PINGPONG_INFO_FILE}.${process.pid}.tmp`;
  fs.writeFileSync(temporary, JSON.stringify(info));
  fs.renameSync(temporary, process.env.PINGPONG_INFO_FILE);
}
process.stderr.write(`bun server listening on ${args.host}:${server.port}\n`);

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => {
    server.stop(true);
    process.exit(0);
  });
}
