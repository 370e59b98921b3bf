"""Two aiohttp clients ping-pong through a relay server, forever: a plain script, as people write one.

Usage: python aiohttp_pingpong.py ws://HOST:PORT/ROOM
"""

import asyncio
import sys

import aiohttp


async def main(url):
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as alice, session.ws_connect(url) as bob:
            await alice.send_str("abcd")
            while True:
                message = await bob.receive_str()
                await bob.send_str(message)
                message = await alice.receive_str()
                await alice.send_str(message)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
