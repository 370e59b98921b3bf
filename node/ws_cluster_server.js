'use strict';
// Ping-pong relay server on the `ws` library with --workers N processes through Node.js's cluster module (as its
// documentation shows: the primary forks N workers that share the port, handing connections out round-robin); a
// room's members on other workers are reached through the Redis broker of --broker (node/worker_rooms.js, with
// node-redis). With --workers 1 the process serves itself, as node/ws_server.js does. With --worker-ports, worker i
// (the primary numbers them as it forks) also listens on a port of its own, PORT+1+i, bound by the worker itself
// (listen's exclusive: true), where no other worker takes connections.

const cluster = require('node:cluster');
const requireDependency = require('./dependencies');
const { WebSocketServer, WebSocket } = requireDependency('ws');
const { parseServerArgs, writeServerInfo } = require('./server_support');
const { WorkerRooms } = require('./worker_rooms');

const args = parseServerArgs('ws_cluster_server.js', ['auto', 'libuv'], { workers: true });
const WORKER_INDEX_ENV = 'PINGPONG_WORKER_INDEX'; // set by the primary in each worker it forks

function runPrimary() {
  let stopping = false;
  let failed = 0;
  for (let index = 0; index < args.workers; index += 1) cluster.fork({ [WORKER_INDEX_ENV]: String(index) });
  cluster.on('exit', (worker, code, signal) => {
    if (!stopping) {
      process.stderr.write(`worker ${worker.process.pid} exited (${signal || code}): stopping\n`);
      failed = 1;
      stopAll();
    }
    if (Object.keys(cluster.workers).length === 0) process.exit(failed);
  });
  function stopAll() {
    stopping = true;
    for (const worker of Object.values(cluster.workers)) worker.process.kill('SIGTERM');
  }
  for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, stopAll);
}

/** --worker-ports: a WebSocket server on this worker's own port, PORT+1+index, handing its connections to
 * onConnection; resolves with the port once it listens. */
function serveOwnPort(tlsOptions, options, onConnection) {
  const index = Number(process.env[WORKER_INDEX_ENV] || 0);
  const httpServer = tlsOptions ? require('https').createServer(tlsOptions) : require('http').createServer();
  const own = new WebSocketServer({ server: httpServer, ...options });
  own.on('connection', onConnection);
  return new Promise((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen({ port: args.port + 1 + index, host: args.host, exclusive: true }, () => {
      resolve({ port: args.port + 1 + index, server: own, httpServer });
    });
  });
}

async function runWorker() {
  // ws's server refuses permessage-deflate unless perMessageDeflate is set: 'default' and 'off' are the same.
  const settings = {
    compression: args.compression, compression_effective: args.compression === 'on', tls: Boolean(args.tlsCert),
    workers: args.workers, worker_manager: 'node:cluster, the primary forks N workers',
    broker: args.broker ? 'redis pub/sub (node-redis), a channel per room subscribed while a member is here' : null,
  };
  const rooms = new WorkerRooms(args.broker, (member, data, isBinary) => {
    if (member.readyState !== WebSocket.OPEN) return false;
    member.send(data, { binary: isBinary });
    return true;
  });
  await rooms.start();
  const tlsOptions = args.tlsCert
    ? { cert: require('fs').readFileSync(args.tlsCert), key: require('fs').readFileSync(args.tlsKey) } : null;
  const roomOf = (request) => (request.url || '/').split('?')[0] || '/';
  // ws's asynchronous verifyClient: the room is joined across the workers before the handshake is answered; a
  // connection that closes before its handshake completes gives the room back.
  const verifyClient = ({ req: request }, done) => {
    const room = roomOf(request);
    rooms.enter(room).then(() => {
      request.roomHeld = true;
      request.socket.once('close', () => {
        if (request.roomHeld) rooms.leave(room, null);
        request.roomHeld = false;
      });
      done(true);
    }, () => done(false, 503));
  };
  const options = { perMessageDeflate: settings.compression_effective, verifyClient };
  function onConnection(socket, request) {
    const room = roomOf(request);
    request.roomHeld = false; // handed to this member: its close gives it back
    rooms.join(room, socket);
    socket.on('message', (data, isBinary) => rooms.relay(room, socket, data, isBinary));
    socket.on('close', () => rooms.leave(room, socket));
    socket.on('error', () => rooms.leave(room, socket));
  }
  // its own port first: the shared port's 'listening' says the worker serves
  const own = args.workerPorts ? await serveOwnPort(tlsOptions, options, onConnection) : null;
  if (own) rooms.ownPort = own.port;
  const httpsServer = tlsOptions ? require('https').createServer(tlsOptions) : null;
  const server = httpsServer
    ? new WebSocketServer({ server: httpsServer, ...options })
    : new WebSocketServer({ host: args.host, port: args.port, ...options });
  if (httpsServer) httpsServer.listen(args.port, args.host, () => server.emit('listening'));

  server.on('connection', onConnection);
  server.on('listening', () => {
    const libraries = { ws: requireDependency('ws/package.json').version };
    if (args.broker) libraries.redis = requireDependency('redis/package.json').version;
    writeServerInfo({
      implementation: 'node-ws-cluster',
      runtime: { name: 'node', version: process.versions.node },
      libraries,
      loop_requested: args.loop,
      loop: 'libuv',
      settings,
    });
    process.stderr.write(`node-ws-cluster worker ${process.pid} listening on ${args.host}:${args.port}\n`);
    rooms.serving();
  });
  (httpsServer || server).on('error', (error) => {
    process.stderr.write(`node-ws-cluster server: ${error.message}\n`);
    process.exit(1);
  });
  for (const signal of ['SIGTERM', 'SIGINT']) {
    process.on(signal, () => {
      for (const socket of server.clients) socket.terminate();
      if (own) {
        for (const socket of own.server.clients) socket.terminate();
        own.httpServer.close();
      }
      rooms.stop().finally(() => {
        server.close(() => (httpsServer ? httpsServer.close(() => process.exit(0)) : process.exit(0)));
      });
    });
  }
}

if (args.workers > 1 && cluster.isPrimary) {
  runPrimary();
} else {
  runWorker().catch((error) => {
    process.stderr.write(`node-ws-cluster worker: ${error.message}\n`);
    process.exit(1);
  });
}
