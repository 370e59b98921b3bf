"""The Python floor: the same relay as the WebSocket servers over plain TCP (asyncio Protocol, TCP_NODELAY).

Wire format in pingpong/kit/raw_tcp.py: length-prefixed frames, the first naming the room.
"""

import asyncio
import socket

from pingpong.kit import server_support
from pingpong.kit.raw_tcp import HEADER, MAX_FRAME

ROOMS: dict[bytes, set] = {}
JOINED = HEADER.pack(0)


class RelayProtocol(asyncio.Protocol):
    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray()
        self.members: set | None = None

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while len(buffer) >= 4:
            (length,) = HEADER.unpack_from(buffer)
            if length > MAX_FRAME:
                self.transport.close()
                return
            end = 4 + length
            if len(buffer) < end:
                return
            if self.members is None:  # the first frame names the room; an empty frame acknowledges the join
                self.members = ROOMS.setdefault(bytes(buffer[4:end]), set())
                self.members.add(self.transport)
                self.transport.write(JOINED)
            else:
                message = bytes(buffer[:end])
                for other in self.members:
                    if other is not self.transport:
                        other.write(message)
            del buffer[:end]

    def connection_lost(self, exc) -> None:
        if self.members is not None:
            self.members.discard(self.transport)


async def main(args):
    loop = asyncio.get_running_loop()
    stop = server_support.stop_requested()
    server = await loop.create_server(RelayProtocol, args.host, args.port)
    server_support.write_server_info("raw-tcp-python", [], args, {"tcp_nodelay": True, "framing": "u32 length"})
    server_support.log(f"raw TCP server listening on {args.host}:{args.port}")
    async with server:
        await stop


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__, compression_choices=("default", "off"))
    server_support.run(main, ARGS)
