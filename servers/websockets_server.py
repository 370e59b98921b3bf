"""Ping-pong relay server on websockets' asyncio implementation (websockets.asyncio.server)."""

import asyncio

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from pingpong.kit import server_support

ROOMS: dict[str, set] = {}


async def relay(websocket):
    """Send every message to the other connections of the sender's room, with the same type and bytes."""
    members = ROOMS.setdefault(server_support.room_of(websocket.request.path), set())
    members.add(websocket)
    try:
        async for message in websocket:
            for other in tuple(members):
                if other is not websocket:
                    try:
                        await other.send(message)
                    except ConnectionClosed:
                        pass
    finally:
        members.discard(websocket)


async def main(args):
    settings = {
        # compression="deflate" is websockets' default; "on" is the same, "off" refuses the extension.
        "compression_effective": None if args.compression == "off" else "deflate",
        "ping_interval": None,  # keepalive pings off, for every server of the suite
        "max_size": 2**20,
        "max_queue": 16,
    }
    stop = server_support.stop_requested()
    async with serve(relay, args.host, args.port, compression=settings["compression_effective"],
                     ping_interval=settings["ping_interval"], max_size=settings["max_size"],
                     max_queue=settings["max_queue"], ssl=server_support.ssl_context(args)):
        server_support.write_server_info("websockets", ["websockets"], args, settings)
        server_support.log(f"websockets server listening on {args.host}:{args.port}")
        await stop


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__)
    server_support.run(main, ARGS)
