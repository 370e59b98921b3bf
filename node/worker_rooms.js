'use strict';
// Rooms that span a server's worker processes (the twin of pingpong/kit/worker_rooms.py): each worker relays a
// message to its own members of the room at once and PUBLISHes it to the room's Redis channel; every other worker,
// subscribed to every room's channel by pattern, delivers it to its own members. Without a broker it is the plain
// in-process relay. Each worker writes its counts (and the members that joined each room here: a pair's placement)
// to PINGPONG_WORKER_STATS_DIR once it serves and when it stops.

const fs = require('fs');
const path = require('path');
const requireDependency = require('./dependencies');
const { WORKER_STATS_DIR_ENV, BROKER_CHANNEL_PREFIX } = require('./server_support');

const WORKER_COUNTS = ['relayed_local', 'published', 'delivered_from_broker', 'own_from_broker'];
const TEXT = 't';
const BINARY = 'b';

/** The client options of a --broker URL: unix:///PATH (a socket) or redis://H:P. */
function brokerOptions(url) {
  return url.startsWith('unix://') ? { socket: { path: url.slice('unix://'.length) } } : { url };
}

class WorkerRooms {
  /** send(member, data, isBinary) sends with the framework's call. */
  constructor(brokerUrl, send) {
    this.brokerUrl = brokerUrl;
    this.send = send;
    this.members = new Map();
    this.origin = String(process.pid);
    this.counts = Object.fromEntries(WORKER_COUNTS.map((name) => [name, 0]));
    this.joinedPerRoom = Object.create(null); // members that joined each room on this worker, ever
    this.publisher = null;
    this.subscriber = null;
  }

  /** Connect and subscribe to every room's channel before the worker serves (then serving()). */
  async start() {
    if (this.brokerUrl) {
      const { createClient } = requireDependency('redis');
      this.publisher = createClient(brokerOptions(this.brokerUrl));
      this.publisher.on('error', (error) => process.stderr.write(`broker: ${error.message}\n`));
      await this.publisher.connect();
      this.subscriber = this.publisher.duplicate();
      this.subscriber.on('error', (error) => process.stderr.write(`broker: ${error.message}\n`));
      await this.subscriber.connect();
      await this.subscriber.pSubscribe(`${BROKER_CHANNEL_PREFIX}*`, (message, channel) => {
        this.deliverPublished(message, channel);
      }, true);
    }
  }

  /** Say, in the stats file, that this worker serves: the orchestrator waits for every worker's. */
  serving() {
    this.writeCounts(false);
  }

  async stop() {
    for (const client of [this.subscriber, this.publisher]) {
      if (client) {
        try { client.destroy(); } catch (error) { /* the broker is already gone at shutdown */ }
      }
    }
    this.writeCounts(true);
  }

  join(room, member) {
    if (!this.members.has(room)) this.members.set(room, new Set());
    this.members.get(room).add(member);
    this.joinedPerRoom[room] = (this.joinedPerRoom[room] || 0) + 1;
  }

  leave(room, member) {
    const members = this.members.get(room);
    if (members) members.delete(member);
  }

  /** A member's message (a Buffer, or a string from Bun): to the room's other members here, then published for the
   * other workers'. */
  relay(room, sender, data, isBinary) {
    for (const other of this.members.get(room) || []) {
      if (other !== sender && this.send(other, data, isBinary)) this.counts.relayed_local += 1;
    }
    if (this.publisher) {
      const header = Buffer.from(`${this.origin}:${isBinary ? BINARY : TEXT}:`);
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      this.publisher.publish(`${BROKER_CHANNEL_PREFIX}${room}`, Buffer.concat([header, bytes]));
      this.counts.published += 1;
    }
  }

  deliverPublished(message, channel) {
    const first = message.indexOf(58); // ':'
    const second = message.indexOf(58, first + 1);
    if (message.toString('latin1', 0, first) === this.origin) {
      this.counts.own_from_broker += 1;
      return;
    }
    const isBinary = message.toString('latin1', first + 1, second) === BINARY;
    const data = message.subarray(second + 1);
    const room = channel.toString().slice(BROKER_CHANNEL_PREFIX.length);
    for (const member of this.members.get(room) || []) {
      if (this.send(member, data, isBinary)) this.counts.delivered_from_broker += 1;
    }
  }

  writeCounts(final) {
    const folder = process.env[WORKER_STATS_DIR_ENV];
    if (!folder) return;
    const file = path.join(folder, `worker-${process.pid}.json`);
    const record = {
      pid: process.pid, final, broker: Boolean(this.brokerUrl), ...this.counts, joined_per_room: this.joinedPerRoom,
    };
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(record));
    fs.renameSync(`${file}.tmp`, file);
  }
}

module.exports = { WorkerRooms, WORKER_COUNTS, brokerOptions };
