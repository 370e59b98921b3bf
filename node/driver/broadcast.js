'use strict';
// The broadcast workload: the twin of pingpong/kit/driver/broadcast.py.

const fs = require('fs');
const { makePayload, PING, PONG } = require('../payloads');
const {
  ACK_FD_ENV, CONNECTIONS_LISTED, EVENTS, matches, mismatch, encodeHistogram, windowEvents, readyThenWaitForGo,
  watchForStalls, openConcurrently, monotonicClock, readPipe,
} = require('./core');

function measure(openConnection, args, onOpened) {
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

module.exports = { measure };
