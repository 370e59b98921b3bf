'use strict';
// The open-loop ping-pong workload (--rate): the twin of pingpong/kit/driver/open_loop.py.

const { makePayload, PING, PONG } = require('../payloads');
const {
  EVENTS, clock, matches, mismatch, encodeHistogram, windowEvents, readyThenWaitForGo, watchForStalls, openPairs,
  openIdleConnections, idleStall,
} = require('./core');

function measure(openConnection, args, onOpened) {
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

module.exports = { measure };
