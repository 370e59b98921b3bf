'use strict';
// A Bun pair alone in one process, second by second: its rate and its minor page faults per roundtrip (the kernel's
// count for the process, /proc/self/stat). Run by benchmarks/bun_faults.py, which explains the modes. Prints one
// JSON line per second on stdout. Usage: bun benchmarks/bun_faults.js MODE SECONDS [BUSY_US]
const fs = require('fs');

const [mode, secondsText, busyText] = process.argv.slice(2);
const seconds = Number(secondsText || 5);
const busyUs = Number(busyText || 0);

function minorFaults() {
  return Number(fs.readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ')[7]);
}

function busy() {
  if (busyUs <= 0) return;
  const until = performance.now() + busyUs / 1000;
  while (performance.now() < until) { /* the cost of a slower host, paid per message */ }
}

let roundtrips = 0;
function startReporting() {
  let second = 0;
  let began = performance.now();
  let faults = minorFaults();
  const timer = setInterval(() => {
    const now = performance.now();
    const nowFaults = minorFaults();
    second += 1;
    process.stdout.write(`${JSON.stringify({
      mode, busy_us: busyUs, second, roundtrips, roundtrips_per_s: roundtrips / ((now - began) / 1000),
      faults: nowFaults - faults, faults_per_roundtrip: (nowFaults - faults) / roundtrips,
    })}\n`);
    roundtrips = 0;
    began = now;
    faults = nowFaults;
    if (second >= seconds) {
      clearInterval(timer);
      process.exit(0);
    }
  }, 1000);
}

async function tcpPair(view) {
  const message = new Uint8Array(4);
  const server = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data(socket, chunk) { socket.write(chunk); } } });
  const client = await Bun.connect({
    hostname: '127.0.0.1',
    port: server.port,
    socket: {
      data(socket, chunk) {
        roundtrips += 1;
        if (view && chunk.subarray(0, 4).length !== 4) throw new Error('short chunk');
        busy();
        socket.write(message);
      },
    },
  });
  client.setNoDelay(true);
  startReporting();
  client.write(message);
}

function websocketPair() {
  const server = Bun.serve({
    hostname: '127.0.0.1',
    port: 0,
    fetch(request, bunServer) { return bunServer.upgrade(request) ? undefined : new Response('no', { status: 400 }); },
    websocket: { message(socket, text) { socket.send(text); } },
  });
  const socket = new WebSocket(`ws://127.0.0.1:${server.port}/`);
  socket.onopen = () => {
    startReporting();
    socket.send('ping');
  };
  socket.onmessage = () => {
    roundtrips += 1;
    busy();
    socket.send('ping');
  };
}

if (mode === 'tcp') tcpPair(false);
else if (mode === 'tcp-view') tcpPair(true);
else if (mode === 'websocket') websocketPair();
else {
  process.stderr.write(`unknown mode ${mode}: tcp | tcp-view | websocket\n`);
  process.exit(2);
}
