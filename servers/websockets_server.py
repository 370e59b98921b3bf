"""Ping-pong relay server on websockets' asyncio implementation (websockets.asyncio.server)."""

import asyncio
import signal

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from pingpong import server_support

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
    stop = asyncio.get_running_loop().create_future()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(
            signal_number, lambda: stop.done() or stop.set_result(None))
    async with serve(relay, args.host, args.port, compression=settings["compression_effective"],
                     ping_interval=settings["ping_interval"], max_size=settings["max_size"],
                     max_queue=settings["max_queue"]):
        server_support.write_server_info("websockets", ["websockets"], args, settings)
        server_support.log(f"websockets server listening on {args.host}:{args.port}")
        await stop


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__)
    if ARGS.loop == "uvloop":
        import uvloop

        uvloop.run(main(ARGS))
    else:
        asyncio.run(main(ARGS))
