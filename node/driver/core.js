'use strict';
// The JavaScript client driver's shared core: the twin of pingpong/kit/driver/core.py. node/driver/index.js is the
// driver's entry; each workload is a file beside this one (ping_pong.js, handshakes.js, broadcast.js, open_loop.js,
// idle_holders.js), the twin of the Python module of the same name, and exports one entry, measure().
// A driver supplies openConnection(url, options) -> {send(payload), onMessage(handler), close(), details}, where
// handler(data, binary) takes a Buffer (or a Uint8Array) with its binary flag, or a string for a text message;
// this module owns the CLI contract, payload checks, the window events and start gates, stall detection, opening the
// connections and the report; a workload's file owns its warmup and measured window.

const fs = require('fs');
const net = require('net');
const { parseArgs } = require('util');
const { PAYLOAD_KINDS } = require('../payloads');

// The contract's vocabulary (pingpong/contract.py; tests/test_contract.py holds these copies to it).
const REPORT_FORMAT_VERSION = 1;
const COMPRESSION_CHOICES = ['default', 'off', 'on'];
const WORKLOADS = ['pingpong', 'handshake', 'broadcast'];
const BROADCAST_ROLES = ['sender', 'receivers'];
const EVENTS_FD_ENV = 'PINGPONG_EVENTS_FD';
const GO_FD_ENV = 'PINGPONG_GO_FD';
const START_FD_ENV = 'PINGPONG_START_FD'; // started ahead of its turn: armed, then wait for go before connecting
const ACK_FD_ENV = 'PINGPONG_ACK_FD'; // broadcast: receivers processes write one byte per message, the sender reads
const EVENTS = { armed: 'armed', ready: 'ready', windowStart: 'window-start', windowEnd: 'window-end', go: 'go' };
const DEFAULTS = {
  duration: '5', warmup: '1', loop: 'auto', compression: 'default', 'payload-size': '4', 'payload-kind': 'text-ascii',
  'stall-timeout': '10', pairs: '1', workload: 'pingpong', receivers: '1', 'broadcast-role': 'sender',
  'ack-processes': '0', 'idle-connections': '0',
};
// Idle connections (and a broadcast's receivers) open with at most this many handshakes in flight at once.
const HANDSHAKES_IN_FLIGHT = 64;
// A report lists the details of at most this many receivers (and says how many connections there were).
const CONNECTIONS_LISTED = 10;
// HdrHistogram range shared with pingpong/kit/driver/core.py: 1 ns .. 60 s at 3 significant digits.
const HISTOGRAM = { lowestDiscernibleValue: 1, highestTrackableValue: 60e9, numberOfSignificantValueDigits: 3 };

const clock = process.hrtime.bigint;

function usageError(message) {
  process.stderr.write(`${process.argv[1]}: error: ${message}\n`);
  process.exit(2);
}

/** The contract's client flags, checked; `supported` narrows them (compression modes, tls: false) for this client. */
function parseDriverArgs(argv, supported = {}) {
  const { compression = COMPRESSION_CHOICES, tls = true } = supported;
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        url: { type: 'string' },
        duration: { type: 'string', default: DEFAULTS.duration },
        warmup: { type: 'string', default: DEFAULTS.warmup },
        loop: { type: 'string', default: DEFAULTS.loop },
        compression: { type: 'string', default: DEFAULTS.compression },
        'payload-size': { type: 'string', default: DEFAULTS['payload-size'] },
        'payload-kind': { type: 'string', default: DEFAULTS['payload-kind'] },
        'stall-timeout': { type: 'string', default: DEFAULTS['stall-timeout'] },
        pairs: { type: 'string', default: DEFAULTS.pairs },
        workload: { type: 'string', default: DEFAULTS.workload },
        'tls-ca': { type: 'string' },
        'no-latency': { type: 'boolean', default: false },
        'ab-windows': { type: 'string', default: '0' },
        receivers: { type: 'string', default: DEFAULTS.receivers },
        'broadcast-role': { type: 'string', default: DEFAULTS['broadcast-role'] },
        'ack-processes': { type: 'string', default: DEFAULTS['ack-processes'] },
        'idle-connections': { type: 'string', default: DEFAULTS['idle-connections'] },
        rate: { type: 'string' },
      },
    }));
  } catch (error) {
    usageError(error.message);
  }
  const args = {
    url: values.url,
    duration: Number(values.duration),
    warmup: Number(values.warmup),
    loop: values.loop,
    compression: values.compression,
    payloadSize: Number(values['payload-size']),
    payloadKind: values['payload-kind'],
    stallTimeout: Number(values['stall-timeout']),
    recordLatency: !values['no-latency'],
    abWindows: Number(values['ab-windows']),
    pairs: Number(values.pairs),
    workload: values.workload,
    tlsCa: values['tls-ca'] || null,
    receivers: Number(values.receivers),
    broadcastRole: values['broadcast-role'],
    ackProcesses: Number(values['ack-processes']),
    idleConnections: Number(values['idle-connections']),
    rate: values.rate === undefined ? null : Number(values.rate),
  };
  if (!args.url) usageError('--url is required');
  if (!(args.duration > 0) || !(args.warmup >= 0) || !(args.stallTimeout > 0)) {
    usageError('--duration and --stall-timeout must be > 0, --warmup >= 0');
  }
  if (!Number.isInteger(args.abWindows) || args.abWindows < 0) usageError('--ab-windows must be an integer >= 0');
  if (!Number.isInteger(args.pairs) || args.pairs < 0 || (args.pairs === 0 && !(args.idleConnections > 0))) {
    usageError('--pairs must be an integer >= 1 (0 only with --idle-connections: a process that holds them)');
  }
  if (args.pairs === 0 && (args.workload !== 'pingpong' || args.rate !== null || args.abWindows > 0)) {
    usageError('--pairs 0 holds idle connections only: no --workload other than pingpong, --rate or --ab-windows');
  }
  if (!WORKLOADS.includes(args.workload)) usageError(`--workload must be one of ${WORKLOADS.join(', ')}`);
  if (args.workload === 'handshake' && (args.pairs > 1 || args.abWindows > 0)) {
    usageError('--workload handshake runs one connection at a time; no --pairs or --ab-windows');
  }
  if (args.pairs > 1 && args.abWindows > 0) usageError('--ab-windows measures one pair; it cannot be combined with --pairs');
  if (!Number.isInteger(args.payloadSize) || args.payloadSize < 1) usageError('--payload-size must be an integer >= 1');
  if (!PAYLOAD_KINDS.includes(args.payloadKind)) usageError(`--payload-kind must be one of ${PAYLOAD_KINDS.join(', ')}`);
  if (!compression.includes(args.compression)) {
    usageError(`--compression ${args.compression} is not supported by this client `
      + `(supported: ${compression.join(', ')})`);
  }
  if (!tls && args.tlsCa) usageError('this client has no TLS: no --tls-ca');
  checkWorkloadArgs(args);
  // JavaScript runtimes have one event loop: only 'auto' (or its name) is meaningful.
  if (!['auto', 'libuv'].includes(args.loop) && !(process.versions.bun && args.loop === 'bun')) {
    usageError(`--loop ${args.loop} is not available in this runtime (use auto)`);
  }
  return args;
}

/** The checks of the broadcast, idle-connection and open-loop flags (usage errors, as the other flags). */
function checkWorkloadArgs(args) {
  if (!Number.isInteger(args.receivers) || args.receivers < 1) usageError('--receivers must be an integer >= 1');
  if (!BROADCAST_ROLES.includes(args.broadcastRole)) usageError('--broadcast-role must be sender or receivers');
  if (!Number.isInteger(args.ackProcesses) || args.ackProcesses < 0) {
    usageError('--ack-processes must be an integer >= 0');
  }
  if (!Number.isInteger(args.idleConnections) || args.idleConnections < 0) {
    usageError('--idle-connections must be an integer >= 0');
  }
  if (args.rate !== null && !(args.rate > 0 && Number.isFinite(args.rate))) usageError('--rate must be a number > 0');
  if (args.workload === 'broadcast') {
    if (args.pairs > 1 || args.rate !== null || args.idleConnections > 0 || args.abWindows > 0) {
      usageError('--workload broadcast has one sender: no --pairs, --rate, --idle-connections or --ab-windows');
    }
    if (args.broadcastRole === 'receivers' && args.ackProcesses > 0) {
      usageError('--ack-processes is for the broadcast sender, not --broadcast-role receivers');
    }
    if (args.ackProcesses > 0 && !process.env[ACK_FD_ENV]) {
      usageError(`--ack-processes ${args.ackProcesses} needs the ack pipe: ${ACK_FD_ENV} is not set`);
    }
  } else {
    if (args.receivers !== 1) usageError('--receivers is for --workload broadcast');
    if (args.broadcastRole !== 'sender' || args.ackProcesses > 0) {
      usageError('--broadcast-role and --ack-processes are for --workload broadcast');
    }
  }
  if (args.rate !== null && (args.workload === 'handshake' || args.abWindows > 0)) {
    usageError('--rate runs the open-loop ping-pong: not with --workload handshake or --ab-windows');
  }
  if (args.workload === 'handshake' && args.idleConnections > 0) {
    usageError('--idle-connections is for the ping-pong workload, not --workload handshake');
  }
}

function runtimeInfo() {
  if (process.versions.bun) return { name: 'bun', version: process.versions.bun };
  return { name: 'node', version: process.versions.node };
}

function encodeHistogram(latencies) {
  const hdr = require('../dependencies')('hdr-histogram-js');
  const histogram = hdr.build({ ...HISTOGRAM, bitBucketSize: 64 });
  for (const value of latencies) {
    histogram.recordValue(Math.min(Math.max(value, HISTOGRAM.lowestDiscernibleValue), HISTOGRAM.highestTrackableValue));
  }
  return hdr.encodeIntoCompressedBase64(histogram);
}

/** Whether a received message is the expected payload: a string (text) or bytes with a binary flag. */
function matches(data, binary, expected) {
  if (typeof data === 'string') return !expected.binary && data === expected.text;
  return binary === expected.binary && expected.bytes.equals(data);
}

/** The failure message when `connection` received `data` instead of the payload `expected`. */
function mismatch(connection, expected, data, binary) {
  return `payload mismatch: connection ${connection} expected ${describe(expected.bytes, expected.binary)}, `
    + `received ${describe(data, binary)}`;
}

function describe(data, binary) {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  const isBinary = typeof data === 'string' ? false : binary;
  const shown = isBinary ? bytes.subarray(0, 24).toString('hex') : JSON.stringify(bytes.subarray(0, 24).toString('utf8'));
  return `${isBinary ? 'binary' : 'text'} of ${bytes.length} bytes ${shown}`;
}

/** Sends `name` down the orchestrator's events pipe (PINGPONG_EVENTS_FD), if it gave one; else does nothing. */
function windowEvents() {
  const eventsFd = process.env[EVENTS_FD_ENV] ? Number(process.env[EVENTS_FD_ENV]) : null;
  return (name) => { if (eventsFd !== null) fs.writeSync(eventsFd, `${name}\n`); };
}

/**
 * Says every connection is open; with a start barrier (PINGPONG_GO_FD), blocks until the orchestrator says go.
 * The read is synchronous on purpose: nothing runs in this process before the go, so the clients started together
 * all begin their warmup at the moment it comes. Throws when the barrier closes without a go.
 */
function readyThenWaitForGo(emit) {
  emit(EVENTS.ready);
  if (!process.env[GO_FD_ENV]) return;
  if (!readGoLine(Number(process.env[GO_FD_ENV]))) {
    throw new Error('start barrier: the orchestrator closed it without a go (another client process failed or did '
      + 'not get ready)');
  }
}

/**
 * Started ahead of its turn (PINGPONG_START_FD): says it is loaded, then blocks, before any connection, until the
 * orchestrator says go. False when the gate closes without a go (the process is not needed: exit without a report).
 */
function armedThenWaitForStart(emit) {
  if (!process.env[START_FD_ENV]) return true;
  emit(EVENTS.armed);
  return readGoLine(Number(process.env[START_FD_ENV]));
}

/** Blocks (synchronously: nothing else runs meanwhile) until a line arrives on fd, closes it; true for the go line. */
function readGoLine(fd) {
  const buffer = Buffer.alloc(64);
  let received = '';
  while (!received.endsWith('\n')) {
    const count = fs.readSync(fd, buffer, 0, buffer.length, null);
    if (count === 0) break;
    received += buffer.toString('utf8', 0, count);
  }
  fs.closeSync(fd);
  return received.trim() === EVENTS.go;
}

/**
 * The SIGCONTs this process has received since countContinues(): each is the end of a pause, the measured cell kept
 * off its CPU for a slice of the host sentinel (which takes the CPU, or stops the cell with SIGSTOP). A measured loop
 * reads count once per roundtrip, to leave the latencies a pause touched out of its histogram.
 */
const continues = { count: 0 };

/**
 * Counts every SIGCONT into `continues` from now on (once, before the measured window). Node and Bun run the listener
 * on a later turn of the event loop, not at once: the ping-pong window allows for a count that comes a few roundtrips
 * late.
 */
function countContinues() {
  process.on('SIGCONT', () => { continues.count += 1; });
}

/** Calls onStall when progress() returns the same value for stallTimeout seconds; returns the interval to clear. */
function watchForStalls(stallTimeout, progress, onStall) {
  let lastSeen;
  let lastChange = Date.now();
  return setInterval(() => {
    const state = progress();
    if (state !== lastSeen) {
      lastSeen = state;
      lastChange = Date.now();
    } else if (Date.now() - lastChange >= stallTimeout * 1000) {
      onStall();
    }
  }, Math.min(1000, stallTimeout * 250));
}

/**
 * Opens every pair's A and B, pair i in room ROOM-p<i> with --pairs; `newPair(label)` makes a pair's record (A and
 * B are added to it). `onOpened` gets the connections opened so far (the report closes them), `fail` their errors.
 */
async function openPairs(openConnection, args, fail, onOpened, newPair) {
  const pairs = [];
  const opened = [];
  for (const [index, url] of pairUrls(args.url, args.pairs).entries()) {
    const label = args.pairs > 1 ? String(index) : '';
    const pair = newPair(label);
    pair.a = await openConnection(url, args, (error) => fail(`connection A${label}: ${error}`));
    opened.push(pair.a);
    onOpened(opened);
    pair.b = await openConnection(url, args, (error) => fail(`connection B${label}: ${error}`));
    opened.push(pair.b);
    onOpened(opened);
    pairs.push(pair);
  }
  return pairs;
}

/**
 * Opens `count` connections, `open(index)` each, with at most HANDSHAKES_IN_FLIGHT handshakes at once; progress(n)
 * hears how many are open. After the first failure no new one starts: resolves, once the handshakes in flight
 * have settled, with {connections: those open, in index order, error: the first failure or null}.
 */
async function openConcurrently(count, open, progress) {
  const connections = new Array(count);
  let next = 0;
  let opened = 0;
  let error = null;
  const worker = async () => {
    while (error === null && next < count) {
      const index = next++;
      try {
        connections[index] = await open(index);
        opened += 1;
        progress(opened);
      } catch (failure) {
        if (error === null) error = failure;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(count, HANDSHAKES_IN_FLIGHT) }, worker));
  return { connections: connections.filter((connection) => connection !== undefined), error };
}

/**
 * --idle-connections N: opens N connections in the room ROOM-idle and holds them, never sending; one closing later
 * fails the run (`fail`). They are not in the report's "connections" and are not closed one by one: the process's
 * exit closes them. Resolves with {connections, report}; rejects when not all of them open.
 */
async function openIdleConnections(openConnection, args, fail, progress) {
  const requested = args.idleConnections;
  const url = roomUrl(args.url, '-idle');
  const started = clock();
  const { connections, error } = await openConcurrently(requested, (index) => openConnection(url, args,
    (problem) => fail(`idle connection ${index}: ${problem}`)), progress);
  if (error !== null) {
    throw new Error(`idle connections: opened ${connections.length} of ${requested}: ${error.name || 'Error'}: `
      + `${error.message || String(error)}`);
  }
  // Node cannot read RLIMIT_NOFILE (the harness raises it before starting the client).
  const report = { requested, opened: connections.length, open_s: Number(clock() - started) / 1e9, nofile_limit: null };
  return { connections, report };
}

function idleStall(args, opened) {
  return `stall: no new idle connection opened for ${args.stallTimeout} s (phase idle-connecting, `
    + `${opened} of ${args.idleConnections} opened)`;
}

/**
 * CLOCK_MONOTONIC in ns (a BigInt): the clock of Python's time.monotonic_ns(), shared by every process on the host,
 * so broadcast timestamps compare across processes. Node's process.hrtime.bigint() reads it; Bun's counts from
 * the process's start, so in Bun clock_gettime(CLOCK_MONOTONIC) is called from libc through bun:ffi.
 */
function monotonicClock() {
  if (!process.versions.bun) return clock;
  const { dlopen, FFIType, ptr } = require('bun:ffi');
  const CLOCK_MONOTONIC = 1;
  const symbols = { clock_gettime: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 } };
  let libc = null;
  for (const name of ['libc.so.6', 'libc.so']) {
    try {
      libc = dlopen(name, symbols);
      break;
    } catch (_) { /* try the next name */ }
  }
  if (libc === null) throw new Error('cannot read CLOCK_MONOTONIC in Bun: libc not found for bun:ffi');
  const timespec = new BigInt64Array(2);
  return () => {
    if (libc.symbols.clock_gettime(CLOCK_MONOTONIC, ptr(timespec)) !== 0) throw new Error('clock_gettime failed');
    return timespec[0] * 1000000000n + timespec[1];
  };
}

/** Calls onBytes(count) for the bytes written on the read end of a pipe `fd`; onEnd() when every writer closed it. */
function readPipe(fd, onBytes, onError, onEnd) {
  // Node: a net.Socket on the fd (epoll). Bun's never delivers data from a pipe fd; its file stream does.
  const stream = process.versions.bun
    ? fs.createReadStream(null, { fd, highWaterMark: 4096 })
    : new net.Socket({ fd, readable: true, writable: false });
  stream.on('data', (chunk) => onBytes(chunk.length));
  stream.on('error', (error) => onError(error.message || String(error)));
  stream.on('end', onEnd);
  return stream;
}

/** The room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs (as core.py). */
function pairUrls(url, count) {
  if (count === 1) return [url];
  return Array.from({ length: count }, (_, index) => roomUrl(url, `-p${index}`));
}

/** The URL of the room named by the URL's room and a suffix: ws://h:p/ROOM?q -> ws://h:p/ROOM<suffix>?q. */
function roomUrl(url, suffix) {
  const [base, query] = url.split('?', 2);
  return `${base}${suffix}${query ? `?${query}` : ''}`;
}

module.exports = {
  parseDriverArgs, armedThenWaitForStart,
  runtimeInfo, encodeHistogram, pairUrls, roomUrl,
  REPORT_FORMAT_VERSION, COMPRESSION_CHOICES, WORKLOADS, BROADCAST_ROLES, EVENTS_FD_ENV, GO_FD_ENV, START_FD_ENV,
  ACK_FD_ENV, EVENTS,
  DEFAULTS, HISTOGRAM, HANDSHAKES_IN_FLIGHT, CONNECTIONS_LISTED,
  // For the workload files beside this one.
  clock, matches, mismatch, windowEvents, readyThenWaitForGo, watchForStalls, openPairs, openConcurrently,
  openIdleConnections, idleStall, monotonicClock, readPipe, continues, countContinues,
};
