"""A deliberately wrong server for tests: it relays within the room, and 0.2 s later leaks a copy to every room."""

import asyncio

from websockets.asyncio.server import serve

from pingpong.kit import server_support

LEAK_DELAY_S = 0.2  # inside the relay check's silence window, after its first connection is being watched
CONNECTIONS: dict[object, str] = {}  # every open connection and its room


async def leak_later(message, sender) -> None:
    await asyncio.sleep(LEAK_DELAY_S)
    for connection, room in list(CONNECTIONS.items()):
        if room != CONNECTIONS.get(sender):
            await connection.send(message)


async def relay(websocket):
    CONNECTIONS[websocket] = websocket.request.path
    try:
        async for message in websocket:
            for other, room in list(CONNECTIONS.items()):
                if other is not websocket and room == websocket.request.path:
                    await other.send(message)
            asyncio.get_running_loop().create_task(leak_later(message, websocket))
    finally:
        CONNECTIONS.pop(websocket, None)


async def main(args):
    stop = server_support.stop_requested()
    async with serve(relay, args.host, args.port, compression=None):
        await stop


if __name__ == "__main__":
    server_support.run(main, server_support.parse_args(__doc__))
