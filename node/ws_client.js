'use strict';
// Ping-pong client driver on the `ws` library (new WebSocket(url, options), as ws's README shows).

const requireDependency = require('./dependencies');
const WebSocket = requireDependency('ws');
const driver = require('./driver');

function openConnection(url, args, onError) {
  return new Promise((resolve, reject) => {
    // ws offers permessage-deflate unless perMessageDeflate is false; 'default' keeps ws's own choice.
    const options = args.compression === 'off' ? { perMessageDeflate: false } : {};
    // wss://: trust the run's throwaway CA (ws passes `ca` on to tls.connect).
    if (args.tlsCa) options.ca = require('fs').readFileSync(args.tlsCa);
    const socket = new WebSocket(url, options);
    socket.once('open', () => {
      socket.on('error', (error) => onError(error.message));
      socket.on('close', (code) => onError(`closed by the server (code ${code})`));
      resolve({
        send: (payload) => socket.send(payload.bytes, { binary: payload.binary }),
        onMessage: (handler) => socket.on('message', handler),
        close: () => { socket.removeAllListeners('close'); socket.close(); },
        closeAndWait: () => new Promise((resolve) => {
          socket.removeAllListeners('close');
          socket.once('close', () => resolve());
          socket.close();
        }),
        details: () => ({
          extensions: socket.extensions || null,
          subprotocol: socket.protocol || null,
          family: socket._socket.remoteFamily === 'IPv6' ? 'ipv6' : 'ipv4',
          local_address: `${socket._socket.localAddress}:${socket._socket.localPort}`,
          peer_address: `${socket._socket.remoteAddress}:${socket._socket.remotePort}`,
          // Node has no getsockopt; ws calls socket.setNoDelay() on every connection it opens.
          tcp_nodelay: null,
          tcp_nodelay_source: 'not readable in Node.js; ws sets it with socket.setNoDelay()',
        }),
      });
    });
    socket.once('error', (error) => reject(new Error(`cannot connect to ${url}: ${error.message}`)));
  });
}

driver.main({
  implementation: 'node-ws',
  libraries: { ws: requireDependency('ws/package.json').version },
  openConnection,
  settings: (args) => ({
    compression_offered: args.compression !== 'off',
    per_message_deflate_threshold: 1024,
  }),
});
