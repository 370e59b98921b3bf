'use strict';
// The entry of a JavaScript client driver: parse the contract's flags, hand the run to one workload file's
// measure(), print the one JSON report. pingpong/kit/driver/main.py is its twin. Nothing requires this file but
// index.js; the workload files require core.js, never this one.

const {
  parseDriverArgs, REPORT_FORMAT_VERSION, runtimeInfo, armedThenWaitForStart, windowEvents,
} = require('./core');

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
  // The workload's file, loaded now, before the gate, so that nothing is loaded between the go and connecting.
  const measurement = workloadModule(args).measure;
  // Loaded now, before the gate, rather than after the window when the latencies are encoded: it took about
  // 35 ms here, which the next attempt would wait for.
  require('../dependencies')('hdr-histogram-js');
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
    finish(await measurement(openConnection, args, (opened) => { connections = opened; }));
  } catch (error) {
    finish({ error: error.message || String(error) });
  }
}

/**
 * The module of the workload the flags ask for (a file beside this one); each exports
 * measure(openConnection, args, onOpened), which resolves with the report's measurement.
 */
function workloadModule(args) {
  if (args.workload === 'broadcast') return require('./broadcast');
  if (args.workload === 'handshake') return require('./handshakes');
  if (args.pairs === 0) return require('./idle_holders');
  return args.rate === null ? require('./ping_pong') : require('./open_loop');
}

module.exports = { main };
