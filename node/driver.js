'use strict';
// The ping-pong measurement shared by the JavaScript client drivers: the twin of pingpong/kit/driver.py.
// A driver supplies openConnection(url, options) -> {send(payload), onMessage(handler), close(), details}, where
// handler(data, binary) takes a Buffer (or a Uint8Array) with its binary flag, or a string for a text message;
// this module owns the CLI contract, warmup, the measured window, payload checks, stall detection and the report.

const fs = require('fs');
const { parseArgs } = require('util');
const { makePayload, PAYLOAD_KINDS, PING, PONG } = require('./payloads');

// The contract's vocabulary (pingpong/contract.py; tests/test_contract.py holds these copies to it).
const REPORT_FORMAT_VERSION = 1;
const COMPRESSION_CHOICES = ['default', 'off', 'on'];
const WORKLOADS = ['pingpong', 'handshake'];
const EVENTS_FD_ENV = 'PINGPONG_EVENTS_FD';
const GO_FD_ENV = 'PINGPONG_GO_FD';
const EVENTS = { ready: 'ready', windowStart: 'window-start', windowEnd: 'window-end', go: 'go' };
const DEFAULTS = {
  duration: '5', warmup: '1', loop: 'auto', compression: 'default', 'payload-size': '4', 'payload-kind': 'text-ascii',
  'stall-timeout': '10', pairs: '1', workload: 'pingpong',
};
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
  };
  if (!args.url) usageError('--url is required');
  if (!(args.duration > 0) || !(args.warmup >= 0) || !(args.stallTimeout > 0)) {
    usageError('--duration and --stall-timeout must be > 0, --warmup >= 0');
  }
  if (!Number.isInteger(args.abWindows) || args.abWindows < 0) usageError('--ab-windows must be an integer >= 0');
  if (!Number.isInteger(args.pairs) || args.pairs < 1) usageError('--pairs must be an integer >= 1');
  if (!WORKLOADS.includes(args.workload)) usageError('--workload must be pingpong or handshake');
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
  // JavaScript runtimes have one event loop: only 'auto' (or its name) is meaningful.
  if (!['auto', 'libuv'].includes(args.loop) && !(process.versions.bun && args.loop === 'bun')) {
    usageError(`--loop ${args.loop} is not available in this runtime (use auto)`);
  }
  return args;
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
    const measurement = args.workload === 'handshake' ? measureHandshakes : measure;
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
  const goFd = Number(process.env[GO_FD_ENV]);
  const buffer = Buffer.alloc(64);
  let received = '';
  while (!received.endsWith('\n')) {
    const count = fs.readSync(goFd, buffer, 0, buffer.length, null);
    if (count === 0) break;
    received += buffer.toString('utf8', 0, count);
  }
  fs.closeSync(goFd);
  if (received.trim() !== EVENTS.go) {
    throw new Error('start barrier: the orchestrator closed it without a go (another client process failed or did '
      + 'not get ready)');
  }
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
  }

  /** Resolves with the measurement, or rejects with the first failure (mismatch, connection error, stall). */
  run() {
    return new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
      this.watchdog = watchForStalls(this.args.stallTimeout, () => this.progress(), () => this.fail(
        `stall: no roundtrip completed for ${this.args.stallTimeout} s (phase ${this.phase}, `
        + `${this.warmupRoundtrips + this.totalRoundtrips + this.windowRoundtrips} roundtrips completed before)`));
      this.connect().catch((error) => this.fail(error.message || String(error)));
    });
  }

  progress() {
    return `${this.phase}/${this.warmupRoundtrips}/${this.totalRoundtrips + this.windowRoundtrips}`;
  }

  fail(message) {
    if (this.done) return;
    this.done = true;
    clearInterval(this.watchdog);
    this.reject(new Error(message));
  }

  /** Opens every pair's A and B, then starts the warmup (or the window, with no warmup) with each A's ping. */
  async connect() {
    const { args } = this;
    const opened = [];
    for (const [index, url] of pairUrls(args.url, args.pairs).entries()) {
      const label = args.pairs > 1 ? String(index) : '';
      const pair = { label, roundtrips: 0, roundtripStart: 0n };
      pair.a = await this.openConnection(url, args, (error) => this.fail(`connection A${label}: ${error}`));
      opened.push(pair.a);
      this.onOpened(opened);
      pair.b = await this.openConnection(url, args, (error) => this.fail(`connection B${label}: ${error}`));
      opened.push(pair.b);
      this.onOpened(opened);
      this.pairs.push(pair);
    }
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

/** The room URL of each pair: the given room for one pair, ROOM-p0 .. ROOM-p<N-1> for N pairs (as driver.py). */
function pairUrls(url, count) {
  if (count === 1) return [url];
  const [base, query] = url.split('?', 2);
  return Array.from({ length: count }, (_, index) => `${base}-p${index}${query ? `?${query}` : ''}`);
}

module.exports = {
  main, runtimeInfo, encodeHistogram, pairUrls,
  REPORT_FORMAT_VERSION, COMPRESSION_CHOICES, WORKLOADS, EVENTS_FD_ENV, GO_FD_ENV, EVENTS, DEFAULTS, HISTOGRAM,
};
