'use strict';
// Rooms that span a server's worker processes (the twin of pingpong/kit/worker_rooms.py), crossing workers only when
// they must: each worker relays a message to its own members of the room at once, and PUBLISHes it to the room's
// Redis channel only when another worker has a member there; a worker SUBSCRIBEs a room's channel only while it has
// a member in the room. Which workers have members in each room is kept exact by the presence protocol of
// pingpong/contract.py (BROKER_WORKERS_KEY_PREFIX): a set per room, joined atomically with a notice on a control
// channel, and a join complete only once every worker that must publish to the newcomer has acknowledged it.
//
// A server holds a room with `await enter(room)` before it answers the member's handshake, adds the member with
// join(room, member) once the handshake is answered, and gives both back with leave(room, member) (member null when
// the handshake never completed). Without a broker it is the plain in-process relay. Each worker writes its counts
// (and, per room, the members that joined and the messages it published) to PINGPONG_WORKER_STATS_DIR once it
// serves and when it stops.

const fs = require('fs');
const path = require('path');
const requireDependency = require('./dependencies');
const {
  WORKER_STATS_DIR_ENV, BROKER_CHANNEL_PREFIX, BROKER_WORKERS_KEY_PREFIX, BROKER_PRESENCE_CHANNEL,
  BROKER_WORKER_CHANNEL_PREFIX,
} = require('./server_support');

const WORKER_COUNTS = ['relayed_local', 'published', 'publish_deliveries', 'delivered_from_broker', 'own_from_broker',
  'broker_joins', 'broker_leaves', 'acks_sent', 'ack_timeouts'];
const TEXT = 't';
const BINARY = 'b';
const JOIN = 'j';
const LEAVE = 'l';
const ACK_TIMEOUT_MS = 5000; // then a join completes anyway (said on stderr, counted): a stall is worse

/** The client options of a --broker URL: unix:///PATH (a socket) or redis://H:P. */
function brokerOptions(url) {
  return url.startsWith('unix://') ? { socket: { path: url.slice('unix://'.length) } } : { url };
}

/** This worker's join of a room on the broker until it is complete (see worker_rooms.py's PendingJoin). */
class PendingJoin {
  constructor(nonce) {
    this.nonce = nonce;
    this.ownNoticeSeen = false;
    this.laterNotices = []; // [JOIN or LEAVE, worker], in the channel's order
    this.snapshot = null;
    this.acknowledged = new Set();
    this.wake = () => {};
  }
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
    this.publishedPerRoom = Object.create(null); // messages this worker published in each room, ever
    this.holds = new Map(); // members entering or in each room here
    this.others = new Map(); // rooms joined on the broker: the other workers with members there
    this.pending = new Map();
    this.chains = new Map(); // room: the promise its last join or leave on the broker settles (one at a time)
    this.nonces = 0;
    this.ownPort = null; // --worker-ports: the port only this worker listens on
    this.publisher = null;
    this.subscriber = null;
  }

  /** Connect, subscribe to the presence channel and this worker's own before the worker serves (then serving()). */
  async start() {
    if (this.brokerUrl) {
      const { createClient } = requireDependency('redis');
      this.publisher = createClient(brokerOptions(this.brokerUrl));
      this.publisher.on('error', (error) => process.stderr.write(`broker: ${error.message}\n`));
      await this.publisher.connect();
      this.subscriber = this.publisher.duplicate();
      this.subscriber.on('error', (error) => process.stderr.write(`broker: ${error.message}\n`));
      await this.subscriber.connect();
      await this.subscriber.subscribe(BROKER_PRESENCE_CHANNEL, (notice) => this.presence(notice));
      await this.subscriber.subscribe(`${BROKER_WORKER_CHANNEL_PREFIX}${this.origin}`,
        (ack) => this.acknowledgement(ack));
    }
  }

  /** Say, in the stats file, that this worker serves: the orchestrator waits for every worker's. */
  serving() {
    this.writeCounts(false);
  }

  /** Leave every room still joined on the broker, close the broker's connections, write the final counts. */
  async stop() {
    if (this.publisher && this.others.size) {
      try {
        const multi = this.publisher.multi();
        for (const room of this.others.keys()) {
          multi.sRem(`${BROKER_WORKERS_KEY_PREFIX}${room}`, this.origin);
          multi.publish(BROKER_PRESENCE_CHANNEL, this.notice(LEAVE, room, ''));
        }
        await multi.exec();
        this.counts.broker_leaves += this.others.size;
      } catch (error) { /* the broker is already gone at shutdown */ }
    }
    for (const client of [this.subscriber, this.publisher]) {
      if (client) {
        try { client.destroy(); } catch (error) { /* the broker is already gone at shutdown */ }
      }
    }
    this.writeCounts(true);
  }

  /** Hold the room for a member whose handshake is about to be answered; the first hold joins the room on the
   * broker and resolves once every worker that must publish to this one knows it has a member there. */
  async enter(room) {
    this.holds.set(room, (this.holds.get(room) || 0) + 1);
    if (!this.publisher) return;
    try {
      await this.serially(room, () => (!this.others.has(room) && this.holds.get(room) ? this.joinBroker(room) : null));
    } catch (error) {
      this.leave(room, null);
      throw error;
    }
  }

  /** Add a member (its handshake answered, its room held by enter()) to the room here. */
  join(room, member) {
    if (!this.members.has(room)) this.members.set(room, new Set());
    this.members.get(room).add(member);
    this.joinedPerRoom[room] = (this.joinedPerRoom[room] || 0) + 1;
  }

  /** Remove a member (null: a hold whose handshake never completed); the last one leaves the room on the broker. */
  leave(room, member) {
    const members = this.members.get(room);
    if (member !== null) {
      if (!members || !members.delete(member)) return Promise.resolve(); // already gone ('error' then 'close')
      if (members.size === 0) this.members.delete(room);
    }
    const held = (this.holds.get(room) || 0) - 1;
    if (held > 0) {
      this.holds.set(room, held);
      return Promise.resolve();
    }
    this.holds.delete(room);
    if (!this.publisher) return Promise.resolve();
    return this.serially(room, () => (this.others.has(room) && !this.holds.get(room) ? this.leaveBroker(room) : null))
      .catch((error) => process.stderr.write(`broker: leaving ${room}: ${error.message}\n`));
  }

  /** A member's message (a Buffer, or a string from Bun): to the room's other members here, then, when another
   * worker has members there, published for theirs. */
  relay(room, sender, data, isBinary) {
    for (const other of this.members.get(room) || []) {
      if (other !== sender && this.send(other, data, isBinary)) this.counts.relayed_local += 1;
    }
    const others = this.others.get(room);
    if (others && others.size) {
      const header = Buffer.from(`${this.origin}:${isBinary ? BINARY : TEXT}:`);
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      this.publisher.publish(`${BROKER_CHANNEL_PREFIX}${room}`, Buffer.concat([header, bytes]))
        .then((reached) => { this.counts.publish_deliveries += reached; }, () => {});
      this.counts.published += 1;
      this.publishedPerRoom[room] = (this.publishedPerRoom[room] || 0) + 1;
    }
  }

  // ---- the presence protocol (pingpong/contract.py BROKER_WORKERS_KEY_PREFIX) ------------------------------------

  /** Run step after the room's previous join or leave on the broker has settled. */
  serially(room, step) {
    const previous = this.chains.get(room) || Promise.resolve();
    const next = previous.then(step, step);
    const settled = next.then(() => {}, () => {});
    this.chains.set(room, settled);
    settled.then(() => { if (this.chains.get(room) === settled) this.chains.delete(room); });
    return next;
  }

  async joinBroker(room) {
    this.nonces += 1;
    const pending = new PendingJoin(String(this.nonces));
    this.pending.set(room, pending);
    try {
      await this.subscriber.subscribe(`${BROKER_CHANNEL_PREFIX}${room}`,
        (message, channel) => this.deliverPublished(message, channel), true);
      const key = `${BROKER_WORKERS_KEY_PREFIX}${room}`;
      const [, snapshot] = await this.publisher.multi()
        .sAdd(key, this.origin).sMembers(key).publish(BROKER_PRESENCE_CHANNEL, this.notice(JOIN, room, pending.nonce))
        .exec();
      pending.snapshot = new Set(snapshot.map(String));
      await this.acknowledgedByAll(room, pending);
      const others = new Set(pending.snapshot);
      others.delete(this.origin);
      for (const [kind, worker] of pending.laterNotices) {
        if (kind === JOIN) others.add(worker); else others.delete(worker);
      }
      this.others.set(room, others);
      this.counts.broker_joins += 1;
    } finally {
      this.pending.delete(room);
    }
  }

  /** Resolves once this worker has seen its own notice and every other worker of the snapshot acknowledged it. */
  acknowledgedByAll(room, pending) {
    const done = () => pending.ownNoticeSeen
      && [...pending.snapshot].every((worker) => worker === this.origin || pending.acknowledged.has(worker));
    if (done()) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const missing = [...pending.snapshot].filter((w) => w !== this.origin && !pending.acknowledged.has(w));
        process.stderr.write(`worker ${this.origin}: room ${room} joined without the acknowledgement of `
          + `${missing.join(', ')} after ${ACK_TIMEOUT_MS} ms\n`);
        this.counts.ack_timeouts += 1;
        resolve();
      }, ACK_TIMEOUT_MS);
      pending.wake = () => {
        if (done()) {
          clearTimeout(timer);
          resolve();
        }
      };
    });
  }

  async leaveBroker(room) {
    this.others.delete(room);
    const key = `${BROKER_WORKERS_KEY_PREFIX}${room}`;
    await this.publisher.multi().sRem(key, this.origin).publish(BROKER_PRESENCE_CHANNEL, this.notice(LEAVE, room, ''))
      .exec();
    await this.subscriber.unsubscribe(`${BROKER_CHANNEL_PREFIX}${room}`);
    this.counts.broker_leaves += 1;
  }

  /** A notice on the presence channel: applied to the room's other workers (or to a pending join's later notices);
   * every other worker's join acknowledged to that worker. */
  presence(notice) {
    const [kind, worker, nonce] = notice.split(':', 3);
    const room = notice.slice(kind.length + worker.length + nonce.length + 3);
    const pending = this.pending.get(room);
    if (worker === this.origin) {
      if (pending && kind === JOIN && nonce === pending.nonce) {
        pending.ownNoticeSeen = true;
        pending.wake();
      }
      return;
    }
    if (pending) {
      if (pending.ownNoticeSeen) pending.laterNotices.push([kind, worker]);
    } else if (this.others.has(room)) {
      if (kind === JOIN) this.others.get(room).add(worker); else this.others.get(room).delete(worker);
    }
    if (kind === JOIN) {
      this.publisher.publish(`${BROKER_WORKER_CHANNEL_PREFIX}${worker}`, `${this.origin}:${nonce}:${room}`)
        .catch(() => {});
      this.counts.acks_sent += 1;
    }
  }

  acknowledgement(ack) {
    const [worker, nonce] = ack.split(':', 2);
    const pending = this.pending.get(ack.slice(worker.length + nonce.length + 2));
    if (pending && pending.nonce === nonce) {
      pending.acknowledged.add(worker);
      if (pending.snapshot) pending.wake();
    }
  }

  notice(kind, room, nonce) {
    return `${kind}:${this.origin}:${nonce}:${room}`;
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
      published_per_room: this.publishedPerRoom,
      own_port: this.ownPort,
    };
    fs.writeFileSync(`${file}.tmp`, JSON.stringify(record));
    fs.renameSync(`${file}.tmp`, file);
  }
}

module.exports = { WorkerRooms, WORKER_COUNTS, brokerOptions };
