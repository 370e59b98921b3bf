"""Ping-pong relay server on picows (ws_create_server with a WSListener, as picows's documentation shows).

picows hands the application frames, not messages: each data frame is relayed as a frame with the same type,
payload and FIN bit, so fragmented messages stay fragmented and whole.
"""


from picows import WSCloseCode, WSListener, WSMsgType, WSTransport, ws_create_server

from pingpong.kit import server_support

ROOMS: dict[str, set] = {}
DATA_FRAMES = (WSMsgType.TEXT, WSMsgType.BINARY, WSMsgType.CONTINUATION)


class RelayListener(WSListener):
    def __init__(self, room: str) -> None:
        self.members = ROOMS.setdefault(room, set())
        self.transport: WSTransport | None = None

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport
        self.members.add(transport)

    def on_ws_frame(self, transport: WSTransport, frame) -> None:
        msg_type = frame.msg_type
        if msg_type in DATA_FRAMES:
            payload = frame.get_payload_as_bytes()
            for other in tuple(self.members):
                if other is not transport:
                    other.send(msg_type, payload, frame.fin)
        elif msg_type == WSMsgType.CLOSE:
            # Echo the peer's close code, as picows's examples do; but a close frame without a code reads as
            # NO_INFO (0), and echoing 0 puts an invalid code on the wire that Node and Bun clients reject.
            code = frame.get_close_code()
            transport.send_close(code if code != WSCloseCode.NO_INFO else WSCloseCode.OK)
            transport.disconnect()

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.members.discard(transport)


def listener_for(request) -> RelayListener:
    path = request.path.decode() if isinstance(request.path, bytes) else request.path
    return RelayListener(server_support.room_of(path))


async def main(args):
    settings = {
        "compression_effective": False,  # picows has no permessage-deflate
        "auto_ping": False,  # keepalive pings off, for every server of the suite
        "max_frame_size": 10 * 2**20,
    }
    stop = server_support.stop_requested()
    server = await ws_create_server(listener_for, args.host, args.port, enable_auto_ping=False,
                                    ssl=server_support.ssl_context(args))
    server_support.write_server_info("picows", ["picows"], args, settings)
    server_support.log(f"picows server listening on {args.host}:{args.port}")
    async with server:
        await stop


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__, compression_choices=("default", "off"))
    server_support.run(main, ARGS)
