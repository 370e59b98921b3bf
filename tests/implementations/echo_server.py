"""A deliberately wrong server for tests: it echoes every message back to its sender instead of relaying it."""

import asyncio

from websockets.asyncio.server import serve

from pingpong.kit import server_support


async def echo(websocket):
    async for message in websocket:
        await websocket.send(message)


async def main(args):
    stop = server_support.stop_requested()
    async with serve(echo, args.host, args.port, compression=None):
        await stop


if __name__ == "__main__":
    server_support.run(main, server_support.parse_args(__doc__))
