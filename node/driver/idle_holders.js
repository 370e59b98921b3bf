'use strict';
// The idle-connection holder (--pairs 0 --idle-connections N): the twin of pingpong/kit/driver/idle_holders.py.
// Opening idle connections (openIdleConnections) is in core.js: the ping-pong and open-loop workloads use it too.

const {
  clock, windowEvents, readyThenWaitForGo, watchForStalls, openIdleConnections, idleStall,
} = require('./core');

// A holder keeps its idle connections this long beyond warmup + duration, so they stay open through the window of
// the process measuring the pair (released by the same go).
const HOLD_MARGIN_S = 1;

/**
 * --pairs 0 --idle-connections N: a holder. It opens the idle connections, says ready, waits for the go, holds them
 * through warmup + duration (+ HOLD_MARGIN_S), and reports them with zero roundtrips: the pair measured beside it,
 * in another process, then pays nothing in its own process for the connections the server holds.
 */
async function measure(openConnection, args) {
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

module.exports = { measure };
