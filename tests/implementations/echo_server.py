"""A deliberately wrong server for tests: it echoes every message back to its sender instead of relaying it."""

import asyncio
import signal

from websockets.asyncio.server import serve

from pingpong import server_support


async def echo(websocket):
    async for message in websocket:
        await websocket.send(message)


async def main(args):
    stop = asyncio.get_running_loop().create_future()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signal_number, lambda: stop.done() or stop.set_result(None))
    async with serve(echo, args.host, args.port, compression=None):
        await stop


if __name__ == "__main__":
    asyncio.run(main(server_support.parse_args(__doc__)))
