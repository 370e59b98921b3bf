'use strict';
// The closed-loop ping-pong workload: the twin of pingpong/kit/driver/ping_pong.py. A roundtrip that a pause of the
// process may have touched (a SIGCONT counted between its start and the end of the LATE_ROUNDTRIPS-th roundtrip after
// it) counts, but its latency is left out.

const { makePayload, PING, PONG } = require('../payloads');
const {
  EVENTS, clock, matches, mismatch, encodeHistogram, windowEvents, readyThenWaitForGo, watchForStalls, openPairs,
  openIdleConnections, idleStall, continues, countContinues,
} = require('./core');

// In a pair's latencies, the place of a roundtrip whose latency a pause may have touched: it counts, its latency is
// left out.
const DROPPED = -1;

// How many roundtrips of a pair the SIGCONT count may come after the roundtrip a pause ended in. The listener runs on
// a later turn of the loop; with two pairs on one loop, a Bun client kept a 206 ms roundtrip across a 200 ms pause
// with an allowance of one (CI, 2026-11-27). The Go client allows the same.
const LATE_ROUNDTRIPS = 3;

function measure(openConnection, args, onOpened) {
  countContinues();
  return new Measurement(openConnection, args, onOpened).run();
}

/**
 * The ping-pong workload on one or more pairs. In each pair B answers ping with pong and A counts the roundtrip
 * and sends the next ping; every A message advances the phases connecting -> warmup -> measure -> report.
 * Normally one measured window, recording as asked. --ab-windows N (a benchmark of the recording's own cost) runs
 * 2N windows on the same connections, recording on and off in ABBA order, and reports each window's rate.
 * A pause (a slice of the host sentinel, then a SIGCONT) must not enter the histogram as a slow roundtrip. Each pair reads the SIGCONT count
 * c[k] at each roundtrip's end, as its timestamp is taken (c[0] as the window starts): roundtrip k's latency is kept
 * iff c[k+L] === c[k-1], L = LATE_ROUNDTRIPS (iff the window's last count equals c[k-1] for the last L). So a change
 * seen at a roundtrip's end drops it and the L before it in the window, where a pause may have ended with the listener
 * run late; all stay in the pair's latencies, as DROPPED, and count. (The listener runs on a turn of the loop, never
 * between two lines of one callback.)
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
    this.pairs = []; // {label, a, b, roundtrips, roundtripStart, latencies, seen, windowFirst}
    this.phase = 'connecting';
    this.done = false; // completed or failed: later messages are ignored
    this.warmupRoundtrips = 0;
    this.warmupStart = 0n;
    this.warmupDeadline = 0n;
    this.windows = []; // closed windows: {recording, roundtrips, elapsed_ns}
    this.record = this.plan[0]; // whether the open window records latencies
    this.windowRoundtrips = 0; // in the open window
    this.totalRoundtrips = 0; // in the closed windows
    this.firstStart = 0n;
    this.start = 0n; // of the open window
    this.deadline = 0n;
    this.cpuStart = null;
    this.continuedStart = 0; // continues.count at the window-start event
    this.continued = 0; // SIGCONTs between the window-start and window-end events
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
    // latencies: ns, of every recording window; seen: continues.count at the pair's last roundtrip's end;
    // windowFirst: the length of latencies when the open window opened.
    this.pairs = await openPairs(this.openConnection, args, (message) => this.fail(message), this.onOpened,
      (label) => ({ label, roundtrips: 0, roundtripStart: 0n, latencies: [], seen: 0, windowFirst: 0 }));
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
        const latency = Number(now - (pair.roundtripStart > this.start ? pair.roundtripStart : this.start));
        if (continues.count === pair.seen) pair.latencies.push(latency);
        else dropAroundPause(pair);
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
      this.continuedStart = continues.count;
      this.emit(EVENTS.windowStart);
      this.cpuStart = process.cpuUsage();
    }
    this.record = this.plan[this.windows.length];
    this.windowRoundtrips = 0;
    this.start = clock();
    for (const pair of this.pairs) {
      pair.seen = continues.count;
      pair.windowFirst = pair.latencies.length;
    }
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
    this.continued = continues.count - this.continuedStart;
    this.emit(EVENTS.windowEnd);
    this.phase = 'report';
    this.done = true;
    clearInterval(this.watchdog);
    this.resolve(this.report(cpu));
  }

  report(cpu) {
    const { args, pairs, windows, plan } = this;
    const elapsed = windows.reduce((sum, w) => sum + Number(w.elapsed_ns), 0) / 1e9;
    const recorded = plan.some(Boolean);
    const perPair = pairs.map((pair) => pair.latencies.filter((latency) => latency !== DROPPED));
    const measurement = {
      warmup: { roundtrips: this.warmupRoundtrips, elapsed_s: Number(this.firstStart - this.warmupStart) / 1e9 },
      roundtrips: this.totalRoundtrips,
      elapsed_s: elapsed,
      roundtrips_per_s: this.totalRoundtrips / elapsed,
      latency: {
        unit: 'ns',
        recorded,
        hdr_histogram: recorded ? encodeHistogram(perPair.flat()) : null,
      },
      pauses: {
        continued: this.continued,
        latency_dropped: pairs.reduce((sum, pair, index) => sum + pair.latencies.length - perPair[index].length, 0),
      },
      cpu: { user_s: cpu.user / 1e6, system_s: cpu.system / 1e6 },
      pairs: pairs.length,
      connections: pairs.flatMap((pair) => [{ name: `A${pair.label}`, ...pair.a.details() },
        { name: `B${pair.label}`, ...pair.b.details() }]),
    };
    if (pairs.length > 1) {
      measurement.per_pair_roundtrips = pairs.map((pair) => pair.roundtrips);
      if (recorded) measurement.per_pair_hdr_histograms = perPair.map((latencies) => encodeHistogram(latencies));
    }
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
 * A SIGCONT came since the pair's last roundtrip ended: this roundtrip and the LATE_ROUNDTRIPS before it in the
 * window (as many as the window has) are DROPPED.
 */
function dropAroundPause(pair) {
  const { latencies } = pair;
  pair.seen = continues.count;
  const from = Math.max(pair.windowFirst, latencies.length - LATE_ROUNDTRIPS);
  for (let index = from; index < latencies.length; index += 1) latencies[index] = DROPPED;
  latencies.push(DROPPED);
}

module.exports = { measure };
