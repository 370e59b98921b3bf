'use strict';
// The JavaScript client driver, the twin of pingpong/kit/driver/: a client program requires this folder and calls
// main() (main.js) with its openConnection. core.js holds the contract, the gates and what every workload
// shares; each workload is one file (ping_pong.js, handshakes.js, broadcast.js, open_loop.js, idle_holders.js),
// named as on the Python side, which main() loads before the start gate.

const { main } = require('./main');
const {
  runtimeInfo, encodeHistogram, pairUrls, roomUrl,
  REPORT_FORMAT_VERSION, COMPRESSION_CHOICES, WORKLOADS, BROADCAST_ROLES, EVENTS_FD_ENV, GO_FD_ENV, START_FD_ENV,
  ACK_FD_ENV, EVENTS,
  DEFAULTS, HISTOGRAM, HANDSHAKES_IN_FLIGHT, CONNECTIONS_LISTED,
} = require('./core');

module.exports = {
  main, runtimeInfo, encodeHistogram, pairUrls, roomUrl,
  REPORT_FORMAT_VERSION, COMPRESSION_CHOICES, WORKLOADS, BROADCAST_ROLES, EVENTS_FD_ENV, GO_FD_ENV, START_FD_ENV,
  ACK_FD_ENV, EVENTS,
  DEFAULTS, HISTOGRAM, HANDSHAKES_IN_FLIGHT, CONNECTIONS_LISTED,
};
