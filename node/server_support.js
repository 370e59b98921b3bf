'use strict';
// What the JavaScript relay servers share: the contract's flags and the optional server report (the twin of
// pingpong/kit/server_support.py).

const fs = require('fs');
const { parseArgs } = require('util');

// The contract's vocabulary (pingpong/contract.py; tests/test_contract.py holds these copies to it).
const REPORT_FORMAT_VERSION = 1;
const COMPRESSION_CHOICES = ['default', 'off', 'on'];
const INFO_FILE_ENV = 'PINGPONG_INFO_FILE';
const WORKER_STATS_DIR_ENV = 'PINGPONG_WORKER_STATS_DIR';
const BROKER_CHANNEL_PREFIX = 'pingpong:room:';
const BROKER_WORKERS_KEY_PREFIX = 'pingpong:room-workers:';
const BROKER_PRESENCE_CHANNEL = 'pingpong:presence';
const BROKER_WORKER_CHANNEL_PREFIX = 'pingpong:worker:';
const DEFAULTS = { host: '127.0.0.1', loop: 'auto', compression: 'default' };

/**
 * Parse --host --port --loop --compression (and --tls-cert --tls-key); exit 2 with one message on bad input.
 * `supported` narrows what this server offers: its compression modes, and tls: false for a server without TLS;
 * workers: true for a server that runs --workers N processes joined by --broker, worker i also on a port of its own,
 * PORT+1+i, with --worker-ports (the others refuse all three).
 */
function parseServerArgs(program, loops, supported = {}) {
  const { compression = COMPRESSION_CHOICES, tls = true, workers = false } = supported;
  const usage = `usage: ${program} --host H --port P [--loop ${loops.join('|')}] `
    + `[--compression ${compression.join('|')}]${tls ? ' [--tls-cert FILE --tls-key FILE]' : ''}`
    + `${workers ? ' [--workers N --broker URL] [--worker-ports]' : ''}`;
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        host: { type: 'string', default: DEFAULTS.host },
        port: { type: 'string' },
        loop: { type: 'string', default: DEFAULTS.loop },
        compression: { type: 'string', default: DEFAULTS.compression },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        workers: { type: 'string', default: '1' },
        broker: { type: 'string' },
        'worker-ports': { type: 'boolean', default: false },
      },
    }));
  } catch (error) {
    process.stderr.write(`${error.message}\n${usage}\n`);
    process.exit(2);
  }
  const port = Number(values.port);
  const problems = [];
  if (!Number.isInteger(port) || port < 0 || port > 65535) problems.push('--port must be an integer 0-65535');
  if (!loops.includes(values.loop)) problems.push(`--loop ${values.loop} is not available here (use auto)`);
  if (!compression.includes(values.compression)) {
    problems.push(`--compression ${values.compression} is not supported by this server `
      + `(supported: ${compression.join(', ')})`);
  }
  if (!tls && (values['tls-cert'] || values['tls-key'])) {
    problems.push('this server has no TLS: no --tls-cert or --tls-key');
  }
  if (Boolean(values['tls-cert']) !== Boolean(values['tls-key'])) problems.push('--tls-cert and --tls-key go together');
  const workerCount = Number(values.workers);
  if (!workers && (workerCount !== 1 || values.broker || values['worker-ports'])) {
    problems.push('this server runs one process: no --workers, --broker or --worker-ports');
  }
  if (!Number.isInteger(workerCount) || workerCount < 1 || (workerCount > 1 && !values.broker)) {
    problems.push('--workers must be at least 1, and more than 1 needs --broker');
  }
  if (problems.length) {
    process.stderr.write(`${problems.join('; ')}\n${usage}\n`);
    process.exit(2);
  }
  return {
    host: values.host, port, loop: values.loop, compression: values.compression,
    tlsCert: values['tls-cert'] || null, tlsKey: values['tls-key'] || null,
    workers: workerCount, broker: values.broker || null, workerPorts: values['worker-ports'],
  };
}

/** Write the server report atomically to PINGPONG_INFO_FILE, when the orchestrator set it. */
function writeServerInfo(info) {
  const path = process.env[INFO_FILE_ENV];
  if (!path) return;
  const temporary = `${path}.${process.pid}.tmp`;
  const report = { format_version: REPORT_FORMAT_VERSION, role: 'server', pid: process.pid, ...info };
  fs.writeFileSync(temporary, JSON.stringify(report));
  fs.renameSync(temporary, path);
}

module.exports = {
  parseServerArgs, writeServerInfo, REPORT_FORMAT_VERSION, COMPRESSION_CHOICES, INFO_FILE_ENV, DEFAULTS,
  WORKER_STATS_DIR_ENV, BROKER_CHANNEL_PREFIX, BROKER_WORKERS_KEY_PREFIX, BROKER_PRESENCE_CHANNEL,
  BROKER_WORKER_CHANNEL_PREFIX,
};
