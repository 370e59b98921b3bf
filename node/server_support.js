'use strict';
// What the JavaScript relay servers share: the contract's flags and the optional server report (the twin of
// pingpong/kit/server_support.py).

const fs = require('fs');
const { parseArgs } = require('util');

// The contract's vocabulary (pingpong/contract.py; tests/test_contract.py holds these copies to it).
const REPORT_FORMAT_VERSION = 1;
const COMPRESSION_CHOICES = ['default', 'off', 'on'];
const INFO_FILE_ENV = 'PINGPONG_INFO_FILE';
const DEFAULTS = { host: '127.0.0.1', loop: 'auto', compression: 'default' };

/** Parse --host --port --loop --compression; exit 2 with one message on bad input. */
function parseServerArgs(program, loops) {
  const usage = `usage: ${program} --host H --port P [--loop ${loops.join('|')}] [--compression default|off|on]`;
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
  if (!COMPRESSION_CHOICES.includes(values.compression)) problems.push('--compression must be default, off or on');
  if (Boolean(values['tls-cert']) !== Boolean(values['tls-key'])) problems.push('--tls-cert and --tls-key go together');
  if (problems.length) {
    process.stderr.write(`${problems.join('; ')}\n${usage}\n`);
    process.exit(2);
  }
  return {
    host: values.host, port, loop: values.loop, compression: values.compression,
    tlsCert: values['tls-cert'] || null, tlsKey: values['tls-key'] || null,
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
};
