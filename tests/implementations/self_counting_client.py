"""TEST ONLY: a plain two-connection ping-pong, measured from outside, that also counts its own roundtrips.

Usage: self_counting_client.py URL --compression on|off --record PATH. On SIGTERM it writes to PATH, as JSON, the
extensions its connections negotiated and the wall-clock time (ns) at which each of its roundtrips completed, and
exits: the test counts those inside the orchestrator's window and holds the count from outside to it.
"""

import argparse
import asyncio
import json
import signal
import time

import websockets


async def main(args):
    completed = []
    loop = asyncio.get_running_loop()
    stopped = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stopped.set_result, None)
    compression = "deflate" if args.compression == "on" else None
    async with websockets.connect(args.url, compression=compression) as alice, \
            websockets.connect(args.url, compression=compression) as bob:

        async def ping_pong():
            while True:
                await alice.send("abcd")
                await bob.send(await bob.recv())
                await alice.recv()
                completed.append(time.time_ns())

        task = asyncio.create_task(ping_pong())
        await stopped
        task.cancel()
        extensions = [ws.response.headers.get("Sec-WebSocket-Extensions") for ws in (alice, bob)]
    with open(args.record, "w") as record:
        json.dump({"extensions": extensions, "completed_ns": completed}, record)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--compression", choices=("on", "off"), required=True)
    parser.add_argument("--record", required=True)
    asyncio.run(main(parser.parse_args()))
