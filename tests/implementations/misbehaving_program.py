"""TEST ONLY: a program to be measured from outside that goes wrong as its first argument says.

no-connection: runs without connecting; one-connection: opens one and waits; silent: opens two and never sends;
exits-early: ping-pongs for a moment, then exits with code 3; three-connections: opens three and ping-pongs on two.
"""

import asyncio
import sys
import time

import websockets


async def ping_pong(alice, bob, seconds=None):
    end = None if seconds is None else time.monotonic() + seconds
    while end is None or time.monotonic() < end:
        await alice.send("abcd")
        await bob.send(await bob.recv())
        await alice.recv()


async def main(fault, url):
    if fault == "no-connection":
        await asyncio.sleep(3600)
    if fault == "one-connection":
        async with websockets.connect(url):
            await asyncio.sleep(3600)
    async with websockets.connect(url) as alice, websockets.connect(url) as bob:
        if fault == "silent":
            await asyncio.sleep(3600)
        if fault == "exits-early":
            await ping_pong(alice, bob, seconds=0.1)
            print("misbehaving program: leaving early on purpose", file=sys.stderr)
            sys.exit(3)
        if fault == "three-connections":
            async with websockets.connect(url):
                await ping_pong(alice, bob)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
