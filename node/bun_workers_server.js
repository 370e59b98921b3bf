'use strict';
// Ping-pong relay server on Bun.serve with --workers N processes, the way Bun's documentation shows for using every
// core: a small launcher spawns N Bun processes, each Bun.serve({ reusePort: true }) on the same port (the kernel's
// SO_REUSEPORT spreads the connections). A room's members on other workers are reached through the Redis broker of
// --broker (node/worker_rooms.js, with node-redis, which runs under Bun). With --workers 1 the launcher serves
// itself, relaying in-process as node/bun_server.js does (there with Bun's topics). With --worker-ports, worker i
// (the launcher numbers them) also serves a port of its own, PORT+1+i, with a second Bun.serve of the same handlers.

const { parseServerArgs, writeServerInfo } = require('./server_support');
const requireDependency = require('./dependencies');
const { WorkerRooms } = require('./worker_rooms');

const WORKER_ENV = 'PINGPONG_BUN_WORKER'; // set by the launcher in each worker it spawns: its index, from 0
const OPEN = 1; // ServerWebSocket.readyState

const args = parseServerArgs('bun_workers_server.js', ['auto', 'bun'], { workers: true });

function runLauncher() {
  let stopping = false;
  let failed = 0;
  const workers = Array.from({ length: args.workers }, (_, index) => Bun.spawn({
    cmd: [process.execPath, ...process.argv.slice(1)],
    env: { ...process.env, [WORKER_ENV]: String(index) },
    stdin: 'ignore',
    stdout: 'inherit',
    stderr: 'inherit',
  }));
  function stopAll() {
    stopping = true;
    for (const worker of workers) {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGTERM');
    }
  }
  for (const worker of workers) {
    worker.exited.then((code) => {
      if (!stopping) {
        process.stderr.write(`bun worker ${worker.pid} exited (${worker.signalCode || code}): stopping\n`);
        failed = 1;
        stopAll();
      }
    });
  }
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, stopAll);
  Promise.all(workers.map((worker) => worker.exited)).then((codes) => {
    process.exit(Math.max(failed, ...codes.map((code) => (code === null ? 1 : code))));
  });
}

/** --worker-ports: the same handlers served on this worker's own port, PORT+1+index, by this worker alone. */
function serveOwnPort(serveOptions) {
  const index = Number(process.env[WORKER_ENV] || 0);
  return Bun.serve({ ...serveOptions, port: args.port + 1 + index, reusePort: false });
}

async function runWorker() {
  // Bun.serve's websocket.perMessageDeflate is false unless set: 'default' and 'off' are the same.
  const settings = {
    compression: args.compression, compression_effective: args.compression === 'on', idle_timeout: 0,
    tls: Boolean(args.tlsCert), workers: args.workers,
    worker_manager: 'a launcher of N Bun processes (Bun.spawn), each Bun.serve({ reusePort: true })',
    broker: args.broker ? 'redis pub/sub (node-redis), a channel per room subscribed while a member is here' : null,
  };
  const rooms = new WorkerRooms(args.broker, (member, data, isBinary) => {
    if (member.readyState !== OPEN) return false;
    if (isBinary) member.sendBinary(data);
    else member.sendText(typeof data === 'string' ? data : data.toString());
    return true;
  });
  await rooms.start();
  const serveOptions = {
    hostname: args.host,
    port: args.port,
    reusePort: args.workers > 1,
    tls: args.tlsCert ? { cert: Bun.file(args.tlsCert), key: Bun.file(args.tlsKey) } : undefined,
    async fetch(request, bunServer) {
      const room = new URL(request.url).pathname || '/';
      await rooms.enter(room); // the room joined across the workers before the handshake is answered
      if (bunServer.upgrade(request, { data: { room } })) return undefined;
      rooms.leave(room, null);
      return new Response('this server only speaks WebSocket', { status: 426 });
    },
    websocket: {
      perMessageDeflate: settings.compression_effective,
      idleTimeout: 0,
      open(socket) {
        rooms.join(socket.data.room, socket);
      },
      message(socket, message) {
        rooms.relay(socket.data.room, socket, message, typeof message !== 'string');
      },
      close(socket) {
        rooms.leave(socket.data.room, socket);
      },
    },
  };
  const own = args.workerPorts ? serveOwnPort(serveOptions) : null;
  if (own) rooms.ownPort = own.port;
  const server = Bun.serve(serveOptions);
  const libraries = { bun: Bun.version };
  if (args.broker) libraries.redis = requireDependency('redis/package.json').version;
  writeServerInfo({
    implementation: 'bun-workers',
    runtime: { name: 'bun', version: Bun.version },
    libraries,
    loop_requested: args.loop,
    loop: 'bun',
    settings,
  });
  process.stderr.write(`bun-workers worker ${process.pid} listening on ${args.host}:${server.port}\n`);
  rooms.serving();
  let stopping = false;
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
      if (stopping) return;
      stopping = true;
      server.stop(true);
      if (own) own.stop(true);
      rooms.stop().finally(() => process.exit(0));
    });
  }
}

if (args.workers > 1 && !process.env[WORKER_ENV]) {
  runLauncher();
} else {
  runWorker().catch((error) => {
    process.stderr.write(`bun-workers worker: ${error.message}\n`);
    process.exit(1);
  });
}
