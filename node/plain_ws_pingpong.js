'use strict';
// Two ws clients ping-pong through a relay server, forever: a plain script, as people write one.
// Usage: node plain_ws_pingpong.js ws://HOST:PORT/ROOM

const WebSocket = require('ws');

const url = process.argv[2];
const alice = new WebSocket(url);
const bob = new WebSocket(url);

let open = 0;
function start() {
  open += 1;
  if (open === 2) alice.send('abcd');
}

alice.on('open', start);
bob.on('open', start);
bob.on('message', (message) => bob.send(message.toString()));
alice.on('message', (message) => alice.send(message.toString()));
