"""Two websockets clients ping-pong through a relay server, forever: a plain script, as people write one.

Usage: python websockets_pingpong.py ws://HOST:PORT/ROOM
"""

import asyncio
import sys

import websockets


async def main(uri):
    async with websockets.connect(uri) as alice, websockets.connect(uri) as bob:
        await alice.send("abcd")
        while True:
            message = await bob.recv()
            await bob.send(message)
            message = await alice.recv()
            await alice.send(message)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
