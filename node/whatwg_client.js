'use strict';
// Ping-pong client driver on the WHATWG WebSocket API built into the runtime: Node.js's (undici; Node 20 needs
// --experimental-websocket) or Bun's native one. Same program, the manifest says which runtime runs it.

const driver = require('./driver');

// Node.js loads its WebSocket (undici) on first use, about 25 ms here: now, while the client loads ahead of its
// turn, rather than after its go.
const HAS_WEBSOCKET = typeof WebSocket === 'function';

function openConnection(url, args, onError) {
  return new Promise((resolve, reject) => {
    if (!HAS_WEBSOCKET) {
      reject(new Error('this runtime has no global WebSocket (Node.js 20 needs --experimental-websocket)'));
      return;
    }
    if (args.compression === 'on') {
      reject(new Error('the WHATWG WebSocket API cannot ask for permessage-deflate'));
      return;
    }
    const socket = new WebSocket(url);
    socket.binaryType = 'arraybuffer';
    let opened = false;
    socket.onopen = () => {
      opened = true;
      socket.onerror = (event) => onError(event.message || 'error');
      socket.onclose = (event) => onError(`closed by the server (code ${event.code})`);
      resolve({
        send: (payload) => socket.send(payload.binary ? payload.bytes : payload.text),
        onMessage: (handler) => {
          socket.onmessage = (event) => {
            const data = event.data;
            if (typeof data === 'string') handler(data, false);
            else handler(Buffer.from(data), true);
          };
        },
        close: () => { socket.onclose = null; socket.close(); },
        closeAndWait: () => new Promise((resolve) => {
          socket.onclose = () => resolve();
          socket.close();
        }),
        details: () => ({
          extensions: socket.extensions || null,
          subprotocol: socket.protocol || null,
          family: new URL(url).hostname.includes(':') ? 'ipv6' : 'ipv4',
          tcp_nodelay: null,
          tcp_nodelay_source: 'not readable through the WHATWG WebSocket API',
        }),
      });
    };
    socket.onerror = (event) => {
      if (!opened) reject(new Error(`cannot connect to ${url}: ${event.message || 'connection failed'}`));
    };
  });
}

const runtime = driver.runtimeInfo();
driver.main({
  implementation: runtime.name === 'bun' ? 'bun' : 'node-builtin',
  libraries: runtime.name === 'bun' ? { bun: runtime.version } : { undici: process.versions.undici || 'bundled' },
  openConnection,
  settings: () => ({ api: 'WHATWG WebSocket', compression_offered: 'as the runtime offers it (not configurable)' }),
});
