'use strict';
// The raw-TCP floor's wire format for the JavaScript floors (Node's net, Bun.listen / Bun.connect): the twin of
// pingpong/kit/raw_tcp.py. A frame is a 4-byte big-endian payload length and the payload. A connection's first
// frame names its room; the server answers it with an empty frame once the connection is in the room; every later
// frame is relayed verbatim to the other members. There are no message types.

const MAX_FRAME = 64 * 2 ** 20;
const JOINED = Buffer.alloc(4); // the empty frame that acknowledges a join
const FRAMING = 'u32 length'; // as the Python and C floors report it

/** The frame carrying `payload` (a Buffer). */
function frame(payload) {
  const out = Buffer.allocUnsafe(4 + payload.length);
  out.writeUInt32BE(payload.length, 0);
  payload.copy(out, 4);
  return out;
}

/**
 * Incremental parser: feed() the chunks a socket delivers; onFrame(data, start, end) is called for each complete
 * frame, data[start, end) (its 4-byte header included, for relaying verbatim; the payload from start + 4): bounds in
 * the chunk, not views of it, so that a frame that fills its chunk (every ping-pong message) costs no new object.
 * On Bun the first view of a chunk (subarray) moves its bytes out of the garbage-collected heap into a buffer of
 * their own, about 0.04 page faults per chunk (docs/methodology.md, Bun's page faults). The chunks of an incomplete
 * frame are kept (Node and Bun hand over a new Buffer per read) and joined once, when the frame is complete. A frame
 * longer than MAX_FRAME throws (the peer does not speak this protocol: an HTTP request reads as a huge frame).
 */
class FrameParser {
  constructor(onFrame) {
    this.onFrame = onFrame;
    this.pending = []; // the chunks of an incomplete frame
    this.pendingLength = 0;
    this.needed = 4; // bytes that complete the header, then the frame
  }

  feed(chunk) {
    let data = chunk;
    if (this.pending.length) {
      this.pending.push(chunk);
      this.pendingLength += chunk.length;
      if (this.pendingLength < this.needed) return;
      data = Buffer.concat(this.pending, this.pendingLength);
      this.pending = [];
      this.pendingLength = 0;
    }
    let offset = 0;
    this.needed = 4;
    while (data.length - offset >= 4) {
      const length = data.readUInt32BE(offset);
      if (length > MAX_FRAME) throw new Error(`frame of ${length} bytes exceeds the ${MAX_FRAME} byte limit`);
      const end = offset + 4 + length;
      if (data.length < end) {
        this.needed = 4 + length;
        break;
      }
      this.onFrame(data, offset, end);
      offset = end;
    }
    if (offset < data.length) {
      this.pending.push(data.subarray(offset));
      this.pendingLength = data.length - offset;
    }
  }
}

/** Frame data[start, end) to relay verbatim: the chunk itself when the frame fills it, else a view of it. */
function wholeFrame(data, start, end) {
  return start === 0 && end === data.length ? data : data.subarray(start, end);
}

/**
 * Ordered writes on a socket whose write() may take only part of the data and returns how much it took (Bun's
 * native sockets): the rest waits until flush() is called from the socket's drain handler. The data is kept, not
 * copied: nothing here writes into a buffer once it is sent.
 */
class PartialWriter {
  constructor(writeSome) {
    this.writeSome = writeSome;
    this.queue = [];
  }

  write(data) {
    if (this.queue.length === 0) {
      const written = this.writeSome(data);
      if (written >= data.length) return;
      data = data.subarray(Math.max(written, 0));
    }
    this.queue.push(data);
  }

  flush() {
    while (this.queue.length) {
      const head = this.queue[0];
      const written = this.writeSome(head);
      if (written < head.length) {
        this.queue[0] = head.subarray(Math.max(written, 0));
        return;
      }
      this.queue.shift();
    }
  }
}

/** The room a client URL names: tcp://HOST:PORT/ROOM -> host, port and the room's bytes (its path, '/' if none). */
function parseTcpUrl(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new Error(`not a URL: ${url}`);
  }
  if (parsed.protocol !== 'tcp:') throw new Error(`this client speaks raw TCP: expected a tcp:// URL, got ${url}`);
  return { host: parsed.hostname, port: Number(parsed.port), room: Buffer.from(parsed.pathname || '/', 'utf8') };
}

/**
 * One server connection's side of the relay. `rooms` maps a room name to its Set of members; `member` is anything
 * with write(data). The first frame joins the room it names (answered with JOINED), every later frame goes verbatim
 * to the room's other members. feed() takes the socket's chunks (a malformed stream calls close(error)); leave() is
 * for the socket's close.
 */
function relayConnection(rooms, member, close) {
  let members = null;
  const parser = new FrameParser((data, start, end) => {
    if (members === null) {
      const name = data.toString('latin1', start + 4, end); // one char per byte: distinct bytes, distinct rooms
      members = rooms.get(name);
      if (!members) rooms.set(name, (members = new Set()));
      members.add(member);
      member.write(JOINED);
    } else {
      const relayed = wholeFrame(data, start, end);
      for (const other of members) if (other !== member) other.write(relayed);
    }
  });
  return {
    feed(chunk) {
      try {
        parser.feed(chunk);
      } catch (error) {
        close(error);
      }
    },
    leave() {
      if (members !== null) members.delete(member);
    },
  };
}

/**
 * One client connection's side, on a connected socket: join the room, then hand each payload to the driver's
 * handler, typed by the payload kind (frames carry no type). `transport` gives write(data), end() and details() of
 * the socket; its owner passes the socket's chunks to feed() and calls closed(error) when the socket closes.
 */
class ClientConnection {
  constructor(room, binary, transport) {
    this.binary = binary;
    this.transport = transport;
    this.handler = null;
    this.early = []; // payloads that came before onMessage (none do in the driver's workloads)
    this.parser = new FrameParser((data, start, end) => this.deliver(data, start, end));
    this.closing = false;
    this.whenClosed = new Promise((resolve) => { this.onClosed = resolve; });
    this.joined = new Promise((resolve, reject) => {
      this.onJoined = resolve;
      this.fail = (message) => reject(new Error(message));
    });
    transport.write(frame(room));
  }

  /** The driver's connection, once the server acknowledged the join; rejects when the join fails. */
  async open(onError) {
    await this.joined;
    this.fail = onError;
    const end = () => {
      this.closing = true;
      this.transport.end();
      return this.whenClosed;
    };
    return {
      send: (payload) => this.transport.write(this.frameOf(payload)),
      onMessage: (handler) => {
        this.handler = handler;
        for (const payload of this.early.splice(0)) handler(payload, this.binary);
      },
      close: () => { end(); },
      closeAndWait: end,
      details: () => ({ extensions: null, subprotocol: null, ...this.transport.details() }),
    };
  }

  feed(chunk) {
    try {
      this.parser.feed(chunk);
    } catch (error) {
      this.fail(error.message);
    }
  }

  closed(error) {
    this.onClosed();
    if (!this.closing) this.fail(error ? `connection error: ${error.message}` : 'connection closed by the server');
  }

  deliver(data, start, end) {
    if (this.onJoined !== null) {
      if (end - start !== 4) this.fail('the server did not acknowledge joining the room with an empty frame');
      else this.onJoined();
      this.onJoined = null;
    } else if (this.handler !== null) {
      this.handler(sentPayload(data, start, end) || data.subarray(start + 4, end), this.binary);
    } else {
      this.early.push(Buffer.from(data.subarray(start + 4, end)));
    }
  }

  frameOf(payload) {
    let encoded = SENT_FRAMES.get(payload);
    if (encoded === undefined) SENT_FRAMES.set(payload, (encoded = frame(payload.bytes)));
    return encoded;
  }
}

// The driver's payloads (ping, pong: the same objects for the whole run) and their frames, built once, shared by the
// process's connections: what one connection sends, another receives.
const SENT_FRAMES = new Map();

/**
 * The bytes of the sent payload whose frame data[start, end) is byte for byte, or null: the driver then checks them
 * without a view of the chunk (wholeFrame says why); the comparison covers every byte, so a frame that differs in any
 * is handed over as it came and fails the driver's check.
 */
function sentPayload(data, start, end) {
  for (const [payload, encoded] of SENT_FRAMES) {
    if (encoded.length === end - start && encoded.compare(data, start, end) === 0) return payload.bytes;
  }
  return null;
}

/**
 * What a client reports about a connected socket, a Node.js net.Socket or a Bun Socket (they name the addresses
 * alike). Neither runtime can read TCP_NODELAY back; `nodelaySource` says how it was set.
 */
function socketDetails(socket, nodelaySource) {
  return {
    family: socket.remoteFamily === 'IPv6' ? 'ipv6' : 'ipv4',
    local_address: `${socket.localAddress}:${socket.localPort}`,
    peer_address: `${socket.remoteAddress}:${socket.remotePort}`,
    tcp_nodelay: null,
    tcp_nodelay_source: nodelaySource,
  };
}

/** The settings a raw-TCP floor reports, server or client. */
function floorSettings() {
  return { tcp_nodelay: true, framing: FRAMING };
}

module.exports = {
  MAX_FRAME, JOINED, FRAMING, frame, FrameParser, PartialWriter, parseTcpUrl, relayConnection, ClientConnection,
  socketDetails, floorSettings,
};
