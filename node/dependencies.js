'use strict';
// Where the JavaScript implementations load their npm packages from: the project's node_modules, or the
// isolated environment named by PINGPONG_NODE_MODULES (run_bench.py --node-packages "ws@8.14.2" builds it).

const path = require('path');
const { createRequire } = require('module');

const ENVIRONMENT = process.env.PINGPONG_NODE_MODULES;

module.exports = ENVIRONMENT ? createRequire(path.join(ENVIRONMENT, 'package.json')) : require;
