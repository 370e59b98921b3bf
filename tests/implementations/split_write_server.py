"""A deliberately pathological relay for tests: TCP_NODELAY off, and each frame's header and payload in two sends.

With Nagle's algorithm on, the payload waits until the peer ACKs the header, and the peer delays that ACK (~40 ms
on Linux): two stalls per roundtrip. The relay itself is correct, so verification passes and only the rate, the
TCP counters and the socket options tell.
"""

import socket
import struct

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from pingpong.kit import server_support

ROOMS: dict[str, set] = {}


def frame_header(message) -> bytes:
    """An unmasked, final, uncompressed frame header for a text (str) or binary (bytes) message."""
    opcode = 0x1 if isinstance(message, str) else 0x2
    length = len(message.encode() if isinstance(message, str) else message)
    if length < 126:
        return struct.pack("!BB", 0x80 | opcode, length)
    if length < 2**16:
        return struct.pack("!BBH", 0x80 | opcode, 126, length)
    return struct.pack("!BBQ", 0x80 | opcode, 127, length)


def send_in_two_writes(websocket, message) -> None:
    payload = message.encode() if isinstance(message, str) else message
    websocket.transport.write(frame_header(message))
    websocket.transport.write(payload)


async def relay(websocket):
    websocket.transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
    members = ROOMS.setdefault(server_support.room_of(websocket.request.path), set())
    members.add(websocket)
    try:
        async for message in websocket:
            for other in tuple(members):
                if other is not websocket:
                    send_in_two_writes(other, message)
    except ConnectionClosed:
        pass
    finally:
        members.discard(websocket)


async def main(args):
    stop = server_support.stop_requested()
    async with serve(relay, args.host, args.port, compression=None, ping_interval=None):
        server_support.write_server_info("split-write", ["websockets"], args, {"tcp_nodelay": False,
                                                                               "writes_per_frame": 2})
        await stop


if __name__ == "__main__":
    server_support.run(main, server_support.parse_args(__doc__, compression_choices=("default", "off")))
