'use strict';
// The ping-pong measurement shared by the JavaScript client drivers: the twin of pingpong/kit/driver.py.
// A driver supplies openConnection(url, options) -> {send(payload), onMessage(handler), close(), details}, where
// handler(data, binary) takes a Buffer (or a Uint8Array) with its binary flag, or a string for a text message;
// this module owns the CLI contract, warmup, the measured window, payload checks, stall detection and the report.

const fs = require('fs');
const net = require('net');
const { parseArgs } = require('util');
const { makePayload, PAYLOAD_KINDS, PING, PONG } = require('./payloads');

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
// HdrHistogram range shared with pingpong/kit/driver.py: 1 ns .. 60 s at 3 significant digits.
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
  const hdr = require('./dependencies')('hdr-histogram-js');
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

/**
 * Run a client driver: parse the contract's flags, measure, print one JSON object on stdout, exit 0 or 1.
 * `settings(args)` returns the library settings this driver uses, recorded in the report; `supported`, optional,
 * narrows the flags it accepts: {compression: [modes], tls: false}.
 */
async function main({ implementation, libraries, openConnection, settings, supported }) {
  const args = parseDriverArgs(process.argv.slice(2), supported);
  const report = {
    format_version: REPORT_FORMAT_VERSION,
    role: 'client',
    implementation,
    runtime: runtimeInfo(),
    libraries,
    settings: { compression: args.compression, tls: Boolean(args.tlsCa), ...settings(args) },
    payload: { kind: args.payloadKind, size: args.payloadSize },
    loop: process.versions.bun ? 'bun' : 'libuv',
    workload: args.workload,
    error: null,
  };
  // Loaded now, before the gate, rather than after the window when the latencies are encoded: it took about
  // 35 ms here, which the next attempt would wait for.
  require('./dependencies')('hdr-histogram-js');
  if (!armedThenWaitForStart(windowEvents())) process.exit(0);
  let connections = [];
  const finish = (extra) => {
    Object.assign(report, extra);
    report.errors = report.error === null ? 0 : 1;
    if (report.error) process.stderr.write(`${implementation} client: ${report.error}\n`);
    for (const connection of connections) {
      try { connection.close(); } catch (_) { /* closing is best effort */ }
    }
    process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(report.error ? 1 : 0));
  };
  try {
    let measurement = args.rate === null ? measure : measureOpenLoop;
    if (args.pairs === 0) measurement = holdIdleConnections;
    if (args.workload === 'handshake') measurement = measureHandshakes;
    if (args.workload === 'broadcast') measurement = measureBroadcast;
    finish(await measurement(openConnection, args, (opened) => { connections = opened; }));
  } catch (error) {
    finish({ error: error.message || String(error) });
  }
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

function measure(openConnection, args, onOpened) {
  return new Measurement(openConnection, args, onOpened).run();
}

/**
 * The ping-pong workload on one or more pairs. In each pair B answers ping with pong and A counts the roundtrip
 * and sends the next ping; every A message advances the phases connecting -> warmup -> measure -> report.
 * Normally one measured window, recording as asked. --ab-windows N (a benchmark of the recording's own cost) runs
 * 2N windows on the same connections, recording on and off in ABBA order, and reports each window's rate.
 */
class Measurement {
  constructor(openConnection, args, onOpened) {
    this.openConnection = openConnection;
    this.args = args;
    this.onOpened = onOpened;
    this.ping = makePayload(args.payloadKind, args.payloadSize, PING);
    this.pong = makePayload(args.payloadKind, args.payloadSize, PONG);
    this.emit = windowEvents();
    this.durationNs = BigInt(Math.round(args.duration * 1e9));
    this.plan = args.abWindows > 0
      ? Array.from({ length: 2 * args.abWindows }, (_, i) => i % 4 === 0 || i % 4 === 3)
      : [args.recordLatency];
    this.pairs = []; // {label, a, b, roundtrips, roundtripStart}
    this.phase = 'connecting';
    this.done = false; // completed or failed: later messages are ignored
    this.warmupRoundtrips = 0;
    this.warmupStart = 0n;
    this.warmupDeadline = 0n;
    this.windows = []; // closed windows: {recording, roundtrips, elapsed_ns}
    this.latencies = []; // ns, of every recording window
    this.record = this.plan[0]; // whether the open window records latencies
    this.windowRoundtrips = 0; // in the open window
    this.totalRoundtrips = 0; // in the closed windows
    this.firstStart = 0n;
    this.start = 0n; // of the open window
    this.deadline = 0n;
    this.cpuStart = null;
    this.idle = null; // --idle-connections: {connections, report}
    this.idleOpened = 0;
  }

  /** Resolves with the measurement, or rejects with the first failure (mismatch, connection error, stall). */
  run() {
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.watchdog = watchForStalls(this.args.stallTimeout, () => this.progress(), () => this.fail(
        this.phase === 'idle-connecting' ? idleStall(this.args, this.idleOpened)
          : `stall: no roundtrip completed for ${this.args.stallTimeout} s (phase ${this.phase}, `
          + `${this.warmupRoundtrips + this.totalRoundtrips + this.windowRoundtrips} roundtrips completed before)`));
      this.connect().catch((error) => this.fail(error.message || String(error)));
    });
  }

  progress() {
    return `${this.phase}/${this.idleOpened}/${this.warmupRoundtrips}/${this.totalRoundtrips + this.windowRoundtrips}`;
  }

  fail(message) {
    if (this.done) return;
    this.done = true;
    clearInterval(this.watchdog);
    this.reject(new Error(message));
  }

  /**
   * Opens the idle connections (--idle-connections), then every pair's A and B, then starts the warmup (or the
   * window, with no warmup) with each A's ping.
   */
  async connect() {
    const { args } = this;
    if (args.idleConnections > 0) {
      this.phase = 'idle-connecting';
      this.idle = await openIdleConnections(this.openConnection, args, (message) => this.fail(message),
        (opened) => { this.idleOpened = opened; });
      this.phase = 'connecting';
    }
    this.pairs = await openPairs(this.openConnection, args, (message) => this.fail(message), this.onOpened,
      (label) => ({ label, roundtrips: 0, roundtripStart: 0n }));
    readyThenWaitForGo(this.emit);
    for (const pair of this.pairs) {
      pair.a.onMessage((data, binary) => this.onA(pair, data, binary));
      pair.b.onMessage((data, binary) => this.onB(pair, data, binary));
    }
    this.phase = 'warmup';
    this.warmupStart = clock();
    this.warmupDeadline = this.warmupStart + BigInt(Math.round(args.warmup * 1e9));
    if (args.warmup === 0) this.openWindow();
    for (const pair of this.pairs) pair.a.send(this.ping);
  }

  /** B answers ping with pong. */
  onB(pair, data, binary) {
    if (!matches(data, binary, this.ping)) {
      this.fail(mismatch(`B${pair.label}`, this.ping, data, binary));
      return;
    }
    pair.b.send(this.pong);
  }

  /** A counts the roundtrip (and its latency, when recording) and sends the next ping. */
  onA(pair, data, binary) {
    if (this.done) return;
    if (!matches(data, binary, this.pong)) {
      this.fail(mismatch(`A${pair.label}`, this.pong, data, binary));
      return;
    }
    const now = clock();
    if (this.phase === 'measure') {
      this.windowRoundtrips += 1;
      pair.roundtrips += 1;
      if (this.record) {
        this.latencies.push(Number(now - (pair.roundtripStart > this.start ? pair.roundtripStart : this.start)));
      }
      pair.roundtripStart = now;
      if (now >= this.deadline && this.closeWindow(now)) return;
    } else {
      this.warmupRoundtrips += 1;
      if (now >= this.warmupDeadline) this.openWindow();
    }
    pair.a.send(this.ping);
  }

  openWindow() {
    if (this.phase !== 'measure') {
      this.phase = 'measure';
      this.emit(EVENTS.windowStart);
      this.cpuStart = process.cpuUsage();
    }
    this.record = this.plan[this.windows.length];
    this.windowRoundtrips = 0;
    this.start = clock();
    if (this.windows.length === 0) this.firstStart = this.start;
    this.deadline = this.start + this.durationNs;
  }

  /** Ends the current window; opens the next one and returns false, or completes and returns true. */
  closeWindow(end) {
    this.windows.push({ recording: this.record, roundtrips: this.windowRoundtrips, elapsed_ns: end - this.start });
    this.totalRoundtrips += this.windowRoundtrips;
    if (this.windows.length < this.plan.length) {
      this.openWindow();
      return false;
    }
    this.complete();
    return true;
  }

  complete() {
    const cpu = process.cpuUsage(this.cpuStart);
    this.emit(EVENTS.windowEnd);
    this.phase = 'report';
    this.done = true;
    clearInterval(this.watchdog);
    this.resolve(this.report(cpu));
  }

  report(cpu) {
    const { args, pairs, windows, plan } = this;
    const elapsed = windows.reduce((sum, w) => sum + Number(w.elapsed_ns), 0) / 1e9;
    const measurement = {
      warmup: { roundtrips: this.warmupRoundtrips, elapsed_s: Number(this.firstStart - this.warmupStart) / 1e9 },
      roundtrips: this.totalRoundtrips,
      elapsed_s: elapsed,
      roundtrips_per_s: this.totalRoundtrips / elapsed,
      latency: {
        unit: 'ns',
        recorded: plan.some(Boolean),
        hdr_histogram: plan.some(Boolean) ? encodeHistogram(this.latencies) : null,
      },
      cpu: { user_s: cpu.user / 1e6, system_s: cpu.system / 1e6 },
      pairs: pairs.length,
      connections: pairs.flatMap((pair) => [{ name: `A${pair.label}`, ...pair.a.details() },
        { name: `B${pair.label}`, ...pair.b.details() }]),
    };
    if (pairs.length > 1) measurement.per_pair_roundtrips = pairs.map((pair) => pair.roundtrips);
    if (this.idle) measurement.idle_connections = this.idle.report;
    if (args.abWindows > 0) {
      measurement.ab_windows = windows.map((w) => ({
        recording: w.recording, roundtrips: w.roundtrips, roundtrips_per_s: w.roundtrips / (Number(w.elapsed_ns) / 1e9),
      }));
    }
    return measurement;
  }
}

/**
 * The handshake workload: a responder B stays in the room; A opens, sends one ping, gets the pong and closes
 * (waiting for the closing handshake), in a loop. One "roundtrip" is that whole cycle; its rate is handshakes/s.
 */
async function measureHandshakes(openConnection, args, onOpened) {
  const ping = makePayload(args.payloadKind, args.payloadSize, PING);
  const pong = makePayload(args.payloadKind, args.payloadSize, PONG);
  const emit = windowEvents();
  let failure = null;
  let rejectCurrent = null;
  const fail = (message) => {
    if (failure === null) failure = new Error(message);
    if (rejectCurrent) rejectCurrent(failure);
  };
  let phase = 'connecting';
  let completed = 0;
  const watchdog = watchForStalls(args.stallTimeout, () => completed, () => fail(
    `stall: no handshake cycle completed for ${args.stallTimeout} s (phase ${phase}, ${completed} completed before)`));
  // Every await below races against a failure (responder error, stall), so nothing can hang silently.
  const guarded = (promise) => new Promise((resolve, reject) => {
    if (failure) { reject(failure); return; }
    rejectCurrent = reject;
    promise.then(resolve, reject);
  });
  try {
    const responder = await guarded(openConnection(args.url, args, (error) => fail(`connection B: ${error}`)));
    onOpened([responder]);
    readyThenWaitForGo(emit);
    responder.onMessage((data, binary) => {
      if (!matches(data, binary, ping)) {
        fail(mismatch('B', ping, data, binary));
        return;
      }
      responder.send(pong);
    });
    let lastDetails = {};
    const cycle = async () => {
      const connection = await guarded(openConnection(args.url, args, (error) => fail(`connection A: ${error}`)));
      const reply = new Promise((resolve, reject) => connection.onMessage((data, binary) => {
        if (matches(data, binary, pong)) resolve();
        else reject(new Error(mismatch('A', pong, data, binary)));
      }));
      connection.send(ping);
      await guarded(reply);
      lastDetails = connection.details();
      await guarded(connection.closeAndWait());
      completed += 1;
    };
    phase = 'warmup';
    const warmupStart = clock();
    const warmupDeadline = warmupStart + BigInt(Math.round(args.warmup * 1e9));
    let warmupCycles = 0;
    while (clock() < warmupDeadline) {
      await cycle();
      warmupCycles += 1;
    }
    phase = 'measure';
    emit(EVENTS.windowStart);
    const cpuStart = process.cpuUsage();
    const start = clock();
    const deadline = start + BigInt(Math.round(args.duration * 1e9));
    const latencies = [];
    let cycleStart = start;
    let end = start;
    while (end < deadline) {
      await cycle();
      end = clock();
      latencies.push(Number(end - cycleStart));
      cycleStart = end;
    }
    const cpu = process.cpuUsage(cpuStart);
    emit(EVENTS.windowEnd);
    const elapsed = Number(end - start) / 1e9;
    return {
      warmup: { roundtrips: warmupCycles, elapsed_s: Number(start - warmupStart) / 1e9 },
      roundtrips: latencies.length,
      elapsed_s: elapsed,
      roundtrips_per_s: latencies.length / elapsed,
      handshakes: latencies.length,
      latency: { unit: 'ns', recorded: true, hdr_histogram: encodeHistogram(latencies) },
      cpu: { user_s: cpu.user / 1e6, system_s: cpu.system / 1e6 },
      pairs: 1,
      connections: [{ name: 'B (responder)', ...responder.details() }, { name: 'A (last opened)', ...lastDetails }],
    };
  } finally {
    clearInterval(watchdog);
  }
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

// A holder keeps its idle connections this long beyond warmup + duration, so they stay open through the window of
// the process measuring the pair (released by the same go).
const HOLD_MARGIN_S = 1;

/**
 * --pairs 0 --idle-connections N: a holder. It opens the idle connections, says ready, waits for the go, holds them
 * through warmup + duration (+ HOLD_MARGIN_S), and reports them with zero roundtrips: the pair measured beside it,
 * in another process, then pays nothing in its own process for the connections the server holds.
 */
async function holdIdleConnections(openConnection, args) {
  let opened = 0;
  let failure = null;
  const watchdog = watchForStalls(args.stallTimeout, () => `${opened}`, () => { failure = idleStall(args, opened); });
  let idle;
  try {
    idle = await openIdleConnections(openConnection, args, (message) => { failure = message; },
      (count) => { opened = count; });
  } finally {
    clearInterval(watchdog);
  }
  if (failure !== null) throw new Error(failure);
  readyThenWaitForGo(windowEvents());
  const started = clock();
  await new Promise((resolve) => setTimeout(resolve, (args.warmup + args.duration + HOLD_MARGIN_S) * 1000));
  if (failure !== null) throw new Error(failure);
  return {
    roundtrips: 0, elapsed_s: Number(clock() - started) / 1e9, roundtrips_per_s: 0, pairs: 0, holder: true,
    latency: { unit: 'ns', recorded: false, hdr_histogram: null }, connections: [], idle_connections: idle.report,
  };
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

function measureBroadcast(openConnection, args, onOpened) {
  return new Broadcast(openConnection, args, onOpened).run();
}

/**
 * The broadcast workload. The sender process's connection S sends a ping into the room; the server relays it to
 * every other member: this process's N receivers and those of the other processes (--broadcast-role receivers).
 * Message k is complete when every local receiver has it and each of the K receivers processes has acked it (one
 * byte on PINGPONG_ACK_FD, written when all its receivers have it); then S sends message k + 1. Every process
 * records when its first and its last receiver got each message, on CLOCK_MONOTONIC (shared by the host's
 * processes); the sender records each send, and the cycle (send to completion) of each window message as its
 * latency. After the window S sends a pong, the end marker: receivers processes report once all their receivers
 * have it.
 */
class Broadcast {
  constructor(openConnection, args, onOpened) {
    this.openConnection = openConnection;
    this.args = args;
    this.onOpened = onOpened;
    this.isSender = args.broadcastRole === 'sender';
    this.ping = makePayload(args.payloadKind, args.payloadSize, PING);
    this.endMarker = makePayload(args.payloadKind, args.payloadSize, PONG);
    this.emit = windowEvents();
    this.clock = monotonicClock();
    this.ackFd = process.env[ACK_FD_ENV] ? Number(process.env[ACK_FD_ENV]) : null;
    this.ackByte = Buffer.from('a');
    this.acksPerMessage = this.isSender ? args.ackProcesses : 0;
    this.durationNs = BigInt(Math.round(args.duration * 1e9));
    this.sender = null; // S, in the sender process
    this.receivers = []; // {name, connection, count: pings received}
    this.opened = 0; // receivers opened, while connecting
    this.seen = []; // per message: how many local receivers have it
    this.firstNs = []; // per message: when the first local receiver got it
    this.lastNs = []; // per message: when the last local receiver got it
    this.sendNs = []; // sender: per message, when S sent it
    this.received = 0; // messages every local receiver has
    this.completed = 0; // sender: messages complete (local receivers and acks)
    this.acks = 0; // sender: ack bytes read
    this.ended = 0; // local receivers that got the end marker
    this.phase = 'connecting';
    this.done = false;
    this.warmupMessages = 0;
    this.warmupStart = 0n;
    this.warmupDeadline = 0n;
    this.windowFirst = 0;
    this.windowMessages = 0;
    this.latencies = [];
    this.start = 0n;
    this.deadline = 0n;
    this.end = 0n;
    this.cpuStart = null;
    this.cpu = null;
  }

  run() {
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.watchdog = watchForStalls(this.args.stallTimeout, () => this.progress(), () => this.fail(this.stall()));
      this.connect().catch((error) => this.fail(error.message || String(error)));
    });
  }

  progress() {
    return `${this.phase}/${this.opened}/${this.received}/${this.acks}/${this.ended}`;
  }

  stall() {
    const { stallTimeout } = this.args;
    if (this.phase === 'connecting') {
      return `stall: no receiver connection opened for ${stallTimeout} s (phase connecting, `
        + `${this.opened} of ${this.args.receivers} opened)`;
    }
    if (!this.isSender) {
      return `stall: no broadcast message received for ${stallTimeout} s (phase ${this.phase}, `
        + `${this.received} messages received before, ${this.ended} of ${this.receivers.length} receivers ended)`;
    }
    const k = this.completed;
    return `stall: no broadcast message completed for ${stallTimeout} s (phase ${this.phase}, ${k} completed before; `
      + `message ${k}: ${this.seen[k] || 0} of ${this.receivers.length} local receivers, `
      + `${this.acks - this.acksPerMessage * k} of ${this.acksPerMessage} acks)`;
  }

  fail(message) {
    if (this.done) return;
    this.done = true;
    clearInterval(this.watchdog);
    this.reject(new Error(message));
  }

  /** Opens S (sender) then the receivers; listens; ready, go; the sender starts sending. */
  async connect() {
    const { args } = this;
    const opened = [];
    if (this.isSender) {
      this.sender = await this.openConnection(args.url, args, (error) => this.fail(`connection S: ${error}`));
      opened.push(this.sender);
      this.onOpened(opened);
    }
    const { connections, error } = await openConcurrently(args.receivers, (index) => this.openConnection(args.url,
      args, (problem) => this.fail(`connection R${index}: ${problem}`)), (count) => { this.opened = count; });
    this.onOpened(opened.concat(connections));
    if (error !== null) throw error;
    this.receivers = connections.map((connection, index) => ({ name: `R${index}`, connection, count: 0 }));
    // Receivers listen before the ready: the sender may be in another process, sending as soon as it has the go.
    for (const receiver of this.receivers) {
      receiver.connection.onMessage((data, binary) => this.onReceiver(receiver, data, binary));
    }
    if (this.isSender) {
      this.sender.onMessage(() => this.fail('payload mismatch: the sender received a message (the server echoed it '
        + 'back)'));
      if (this.acksPerMessage > 0) {
        readPipe(this.ackFd, (count) => this.onAcks(count), (message) => this.fail(`ack pipe: ${message}`),
          () => this.fail('ack pipe: closed by every receivers process (one failed or ended early)'));
      }
    }
    readyThenWaitForGo(this.emit);
    if (!this.isSender) {
      this.phase = 'receiving';
      return;
    }
    this.phase = 'warmup';
    this.warmupStart = this.clock();
    this.warmupDeadline = this.warmupStart + BigInt(Math.round(args.warmup * 1e9));
    if (args.warmup === 0) this.openWindow(this.warmupStart);
    this.sendNext();
  }

  sendNext() {
    this.sendNs.push(this.clock());
    this.sender.send(this.ping);
  }

  /** A local receiver's message: the next ping, the end marker, or a mismatch. */
  onReceiver(receiver, data, binary) {
    if (this.done) return;
    if (matches(data, binary, this.ping)) {
      const now = this.clock();
      const k = receiver.count;
      receiver.count += 1;
      const seen = (this.seen[k] || 0) + 1;
      this.seen[k] = seen;
      if (seen === 1) this.firstNs[k] = now;
      if (seen === this.receivers.length) {
        this.lastNs[k] = now;
        this.received = k + 1;
        if (this.isSender) this.completeIfDone();
        else if (this.ackFd !== null) fs.writeSync(this.ackFd, this.ackByte);
      }
    } else if (matches(data, binary, this.endMarker)) {
      this.ended += 1;
      if (this.ended === this.receivers.length) this.onEnded();
    } else {
      this.fail(mismatch(receiver.name, this.ping, data, binary));
    }
  }

  onAcks(count) {
    if (this.done) return;
    this.acks += count;
    this.completeIfDone();
  }

  /** Sender: completes the message in flight once every local receiver has it and every ack came. */
  completeIfDone() {
    const k = this.completed;
    if (k >= this.sendNs.length || this.seen[k] !== this.receivers.length) return;
    if (this.acks < this.acksPerMessage * (k + 1)) return;
    const now = this.clock();
    this.completed = k + 1;
    if (this.phase === 'measure') {
      this.windowMessages += 1;
      if (this.args.recordLatency) this.latencies.push(Number(now - this.sendNs[k]));
      if (now >= this.deadline) {
        this.closeWindow(now);
        return;
      }
    } else {
      this.warmupMessages += 1;
      if (now >= this.warmupDeadline) this.openWindow(now);
    }
    this.sendNext();
  }

  openWindow(now) {
    this.phase = 'measure';
    this.emit(EVENTS.windowStart);
    this.cpuStart = process.cpuUsage();
    this.windowFirst = this.sendNs.length;
    this.start = now;
    this.deadline = now + this.durationNs;
  }

  /** Sender: the window ends; S sends the end marker, and the report waits for the local receivers to get it. */
  closeWindow(now) {
    this.cpu = process.cpuUsage(this.cpuStart);
    this.end = now;
    this.emit(EVENTS.windowEnd);
    this.phase = 'ending';
    this.sender.send(this.endMarker);
  }

  /** Every local receiver got the end marker: the sender has sent it, a receivers process reports. */
  onEnded() {
    const expected = this.isSender ? this.sendNs.length : this.received;
    const wrong = this.receivers.find((receiver) => receiver.count !== expected);
    if (wrong) {
      this.fail(`broadcast: connection ${wrong.name} got ${wrong.count} messages before the end marker, `
        + `expected ${expected}`);
      return;
    }
    if (this.isSender && this.phase !== 'ending') {
      this.fail('broadcast: a local receiver got the end marker before the sender sent it');
      return;
    }
    this.phase = 'report';
    this.done = true;
    clearInterval(this.watchdog);
    this.resolve(this.isSender ? this.senderReport() : this.receiversReport());
  }

  connectionDetails() {
    const listed = this.receivers.slice(0, CONNECTIONS_LISTED);
    const details = listed.map((receiver) => ({ name: receiver.name, ...receiver.connection.details() }));
    return this.isSender ? [{ name: 'S', ...this.sender.details() }, ...details] : details;
  }

  senderReport() {
    const { args } = this;
    const elapsed = Number(this.end - this.start) / 1e9;
    return {
      warmup: { roundtrips: this.warmupMessages, elapsed_s: Number(this.start - this.warmupStart) / 1e9 },
      roundtrips: this.windowMessages,
      elapsed_s: elapsed,
      roundtrips_per_s: this.windowMessages / elapsed,
      latency: {
        unit: 'ns',
        recorded: args.recordLatency,
        hdr_histogram: args.recordLatency ? encodeHistogram(this.latencies) : null,
      },
      cpu: { user_s: this.cpu.user / 1e6, system_s: this.cpu.system / 1e6 },
      pairs: 1,
      connections: this.connectionDetails(),
      connections_total: 1 + this.receivers.length,
      broadcast: {
        role: 'sender',
        receivers: this.receivers.length,
        ack_processes: this.acksPerMessage,
        send_ns: this.sendNs.map(Number),
        window_first: this.windowFirst,
        window_count: this.windowMessages,
        first_ns: this.firstNs.map(Number),
        last_ns: this.lastNs.map(Number),
      },
    };
  }

  receiversReport() {
    const count = this.received;
    const spanned = count > 0 ? Number(this.lastNs[count - 1] - this.firstNs[0]) / 1e9 : 0;
    const elapsed = Math.max(spanned, 1e-9);
    return {
      roundtrips: count,
      elapsed_s: elapsed,
      roundtrips_per_s: count / elapsed,
      latency: { unit: 'ns', recorded: false, hdr_histogram: null },
      connections: this.connectionDetails(),
      connections_total: this.receivers.length,
      broadcast: {
        role: 'receivers',
        receivers: this.receivers.length,
        first_ns: this.firstNs.map(Number),
        last_ns: this.lastNs.map(Number),
      },
    };
  }
}

function measureOpenLoop(openConnection, args, onOpened) {
  return new OpenLoop(openConnection, args, onOpened).run();
}

/**
 * The open-loop ping-pong (--rate R): in each pair A sends ping i at its intended time t0 + i/R whether or not the
 * pongs came back (behind schedule, it sends every ping that is due at once, never skipping one), and B answers each
 * ping with a pong. The j-th pong answers the j-th ping; its latency counts from the ping's intended send time, so
 * a late send is not hidden (no coordinated omission). Pings intended in [t0 + warmup, t0 + warmup + duration) are
 * the window's; the report waits for all of their pongs.
 */
class OpenLoop {
  constructor(openConnection, args, onOpened) {
    this.openConnection = openConnection;
    this.args = args;
    this.onOpened = onOpened;
    this.ping = makePayload(args.payloadKind, args.payloadSize, PING);
    this.pong = makePayload(args.payloadKind, args.payloadSize, PONG);
    this.emit = windowEvents();
    this.intervalNs = 1e9 / args.rate;
    this.pairs = []; // {label, a, b, next, intended, answered, roundtrips}
    this.phase = 'connecting';
    this.done = false;
    this.idle = null;
    this.idleOpened = 0;
    // Times in ns as Numbers (CLOCK_MONOTONIC fits in 2^53 for ~104 days of uptime).
    this.t0 = 0;
    this.windowStart = 0;
    this.windowEnd = 0;
    this.windowOpen = false;
    this.windowEnded = false;
    this.timer = null;
    this.sent = 0; // window pings sent
    this.sentTotal = 0;
    this.answered = 0; // window pongs received
    this.answeredInWindow = 0;
    this.warmupAnswered = 0;
    this.lagMax = 0;
    this.lagSum = 0;
    this.lastPong = 0;
    this.latencies = [];
    this.cpuStart = null;
    this.cpu = null;
  }

  run() {
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.watchdog = watchForStalls(this.args.stallTimeout, () => this.progress(), () => {
        // Every ping answered, the next one not due yet (a rate below 1 / stall-timeout): waiting, not a stall.
        if ((this.phase === 'warmup' || this.phase === 'measure') && this.unanswered() === 0) return;
        this.fail(this.stall());
      });
      this.connect().catch((error) => this.fail(error.message || String(error)));
    });
  }

  unanswered() {
    return this.sentTotal - this.warmupAnswered - this.answered;
  }

  // A stall: pings unanswered and no pong for stall-timeout s. With none unanswered each send is progress.
  progress() {
    const waiting = this.unanswered() === 0 ? this.sentTotal : 'unanswered';
    return `${this.phase}/${this.idleOpened}/${this.warmupAnswered + this.answered}/${waiting}`;
  }

  stall() {
    if (this.phase === 'idle-connecting') return idleStall(this.args, this.idleOpened);
    return `stall: no pong received for ${this.args.stallTimeout} s (phase ${this.phase}, ${this.unanswered()} `
      + `pings unanswered; ${this.answered} of ${this.sent} window pings answered)`;
  }

  fail(message) {
    if (this.done) return;
    this.done = true;
    clearInterval(this.watchdog);
    clearTimeout(this.timer);
    this.reject(new Error(message));
  }

  async connect() {
    const { args } = this;
    if (args.idleConnections > 0) {
      this.phase = 'idle-connecting';
      this.idle = await openIdleConnections(this.openConnection, args, (message) => this.fail(message),
        (opened) => { this.idleOpened = opened; });
      this.phase = 'connecting';
    }
    this.pairs = await openPairs(this.openConnection, args, (message) => this.fail(message), this.onOpened,
      (label) => ({ label, next: 0, intended: [], answered: 0, roundtrips: 0 }));
    readyThenWaitForGo(this.emit);
    for (const pair of this.pairs) {
      pair.a.onMessage((data, binary) => this.onA(pair, data, binary));
      pair.b.onMessage((data, binary) => this.onB(pair, data, binary));
    }
    this.phase = 'warmup';
    this.t0 = Number(clock());
    this.windowStart = this.t0 + Math.round(args.warmup * 1e9);
    this.windowEnd = this.windowStart + Math.round(args.duration * 1e9);
    this.tick();
  }

  intendedTime(index) {
    return this.t0 + Math.round(index * this.intervalNs);
  }

  /** Sends every ping that is due (all pairs share the schedule), then sleeps until the next one is. */
  tick() {
    this.timer = null;
    if (this.done) return;
    let now = Number(clock());
    let next = Infinity;
    for (const pair of this.pairs) {
      let intended = this.intendedTime(pair.next);
      while (intended <= now && intended < this.windowEnd) {
        if (!this.windowOpen && intended >= this.windowStart) this.openWindow();
        pair.intended.push(intended);
        pair.next += 1;
        const sentAt = Number(clock());
        pair.a.send(this.ping);
        this.sentTotal += 1;
        if (intended >= this.windowStart) {
          this.sent += 1;
          const lag = sentAt - intended;
          this.lagSum += lag;
          if (lag > this.lagMax) this.lagMax = lag;
        }
        intended = this.intendedTime(pair.next);
      }
      if (intended < this.windowEnd && intended < next) next = intended;
    }
    if (next === Infinity) {
      this.closeWindow();
      return;
    }
    now = Number(clock());
    // Timers count whole milliseconds: round up, never wake before the ping is due.
    this.timer = setTimeout(() => this.tick(), Math.max(0, Math.ceil((next - now) / 1e6)));
  }

  openWindow() {
    this.windowOpen = true;
    this.phase = 'measure';
    this.emit(EVENTS.windowStart);
    this.cpuStart = process.cpuUsage();
  }

  /** Every window ping is sent: the window ends; the report waits for the pongs still on their way. */
  closeWindow() {
    if (!this.windowOpen) this.openWindow(); // a window shorter than one interval still sent its first ping
    this.windowEnded = true;
    this.emit(EVENTS.windowEnd);
    this.phase = 'draining';
    if (this.answered === this.sent) this.complete();
  }

  /** B answers ping with pong. */
  onB(pair, data, binary) {
    if (!matches(data, binary, this.ping)) {
      this.fail(mismatch(`B${pair.label}`, this.ping, data, binary));
      return;
    }
    pair.b.send(this.pong);
  }

  /** A: the pong answers the oldest unanswered ping; a window ping's latency counts from its intended time. */
  onA(pair, data, binary) {
    if (this.done) return;
    if (!matches(data, binary, this.pong)) {
      this.fail(mismatch(`A${pair.label}`, this.pong, data, binary));
      return;
    }
    const now = Number(clock());
    if (pair.answered >= pair.intended.length) {
      this.fail(`open loop: connection A${pair.label} received more pongs than it sent pings`);
      return;
    }
    const intended = pair.intended[pair.answered];
    pair.answered += 1;
    if (intended < this.windowStart) {
      this.warmupAnswered += 1;
      return;
    }
    this.answered += 1;
    pair.roundtrips += 1;
    this.lastPong = now;
    if (!this.windowEnded) this.answeredInWindow += 1;
    if (this.args.recordLatency) this.latencies.push(now - intended);
    if (this.windowEnded && this.answered === this.sent) this.complete();
  }

  complete() {
    this.cpu = process.cpuUsage(this.cpuStart);
    this.phase = 'report';
    this.done = true;
    clearInterval(this.watchdog);
    this.resolve(this.report());
  }

  report() {
    const { args, pairs } = this;
    const elapsed = Math.max(this.lastPong - this.windowStart, 1) / 1e9;
    const measurement = {
      warmup: { roundtrips: this.warmupAnswered, elapsed_s: (this.windowStart - this.t0) / 1e9 },
      roundtrips: this.answered,
      elapsed_s: elapsed,
      roundtrips_per_s: this.answered / elapsed,
      latency: {
        unit: 'ns',
        recorded: args.recordLatency,
        hdr_histogram: args.recordLatency ? encodeHistogram(this.latencies) : null,
      },
      cpu: { user_s: this.cpu.user / 1e6, system_s: this.cpu.system / 1e6 },
      pairs: pairs.length,
      connections: pairs.flatMap((pair) => [{ name: `A${pair.label}`, ...pair.a.details() },
        { name: `B${pair.label}`, ...pair.b.details() }]),
      open_loop: {
        rate_per_pair: args.rate,
        offered_per_s: args.rate * pairs.length,
        sent: this.sent,
        answered: this.answered,
        answered_in_window: this.answeredInWindow,
        achieved_per_s: this.answeredInWindow / args.duration,
        send_lag_max_ns: this.lagMax,
        send_lag_mean_ns: this.sent > 0 ? this.lagSum / this.sent : 0,
      },
    };
    if (pairs.length > 1) measurement.per_pair_roundtrips = pairs.map((pair) => pair.roundtrips);
    if (this.idle) measurement.idle_connections = this.idle.report;
    return measurement;
  }
}

/** The room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs (as driver.py). */
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
  main, runtimeInfo, encodeHistogram, pairUrls, roomUrl,
  REPORT_FORMAT_VERSION, COMPRESSION_CHOICES, WORKLOADS, BROADCAST_ROLES, EVENTS_FD_ENV, GO_FD_ENV, START_FD_ENV,
  ACK_FD_ENV, EVENTS,
  DEFAULTS, HISTOGRAM, HANDSHAKES_IN_FLIGHT, CONNECTIONS_LISTED,
};
