'use strict';
// The handshake workload: the twin of pingpong/kit/driver/handshakes.py.

const { makePayload, PING, PONG } = require('../payloads');
const {
  EVENTS, clock, matches, mismatch, encodeHistogram, windowEvents, readyThenWaitForGo, watchForStalls,
} = require('./core');

/**
 * The handshake workload: a responder B stays in the room; A opens, sends one ping, gets the pong and closes
 * (waiting for the closing handshake), in a loop. One "roundtrip" is that whole cycle; its rate is handshakes/s.
 */
async function measure(openConnection, args, onOpened) {
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

module.exports = { measure };
