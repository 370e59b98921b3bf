"""The Python floor's client driver: the shared ping-pong measurement over plain TCP (asyncio Protocol).

Wire format in pingpong/kit/raw_tcp.py. The URL is tcp://HOST:PORT/ROOM.
"""

import asyncio
import socket
from urllib.parse import urlsplit

from pingpong.kit import driver
from pingpong.kit.raw_tcp import HEADER


class FrameProtocol(asyncio.Protocol):
    """Splits the stream into payloads and hands them to recv() (as str when the payload kind is text)."""

    def __init__(self, text: bool) -> None:
        self.text = text
        self.buffer = bytearray()
        self.queue = driver.MessageQueue()

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while len(buffer) >= 4:
            (length,) = HEADER.unpack_from(buffer)
            if len(buffer) < 4 + length:
                return
            payload = bytes(buffer[4:4 + length])
            del buffer[:4 + length]
            self.queue.deliver(payload.decode() if self.text else payload)

    def connection_lost(self, exc) -> None:
        self.queue.fail(ConnectionError("connection closed by the server"))


def settings(args):
    return {"tcp_nodelay": True, "framing": "u32 length"}


async def open_connection(url, args):
    parts = urlsplit(url)
    if parts.scheme != "tcp":
        raise driver.DriverError(f"this client speaks raw TCP: expected a tcp:// URL, got {url}")
    text = args.payload_kind != "binary"
    transport, protocol = await asyncio.get_running_loop().create_connection(
        lambda: FrameProtocol(text), parts.hostname, parts.port)
    room = (parts.path or "/").encode()
    transport.write(HEADER.pack(len(room)) + room)
    if await protocol.queue.recv() not in ("", b""):
        raise driver.DriverError("the server did not acknowledge joining the room with an empty frame")
    frames: dict = {}  # payload -> its frame, built once (ping and pong are the same objects every time)
    write = transport.write

    async def send(payload):
        encoded = frames.get(payload)
        if encoded is None:
            data = payload.encode() if isinstance(payload, str) else payload
            encoded = frames[payload] = HEADER.pack(len(data)) + data
        write(encoded)

    async def close():
        transport.close()

    return driver.Connection(send=send, recv=protocol.queue.recv, close=close,
                             details={"extensions": None, "subprotocol": None,
                                      **driver.socket_details(transport.get_extra_info("socket"))})


if __name__ == "__main__":
    driver.main("raw-tcp-python", [], open_connection, settings)
