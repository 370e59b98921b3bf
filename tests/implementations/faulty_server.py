"""TEST ONLY: a relay server that misbehaves on purpose, as --fault says (see tests/manifest.toml)."""

import argparse
import asyncio
import os
import signal
import sys
import time

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

FAULTS = ("crash-at-start", "never-ready", "crash-mid-run", "hang-mid-run", "corrupt-mid-run", "binds-elsewhere",
          "flip-one-byte-mid-run", "hang-room-p1-mid-run")
# Messages relayed faithfully before a mid-run fault: past verification's 2 messages, and few enough that even a
# slow machine reaches them within a short test run (10 roundtrips).
FAULT_AFTER_MESSAGES = 20

ROOMS: dict[str, set] = {}
relayed = 0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fault", choices=FAULTS, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", default="auto")
    parser.add_argument("--compression", default="default")
    return parser.parse_args()


def flip_one_byte(message):
    """The message with exactly one byte changed, near its middle; text stays valid UTF-8 and keeps its length."""
    if isinstance(message, bytes):
        middle = len(message) // 2
        return message[:middle] + bytes([message[middle] ^ 0x01]) + message[middle + 1:]
    ascii_positions = [index for index, char in enumerate(message) if char.isascii()]
    index = ascii_positions[len(ascii_positions) // 2]
    replacement = "Z" if message[index] != "Z" else "Y"
    return message[:index] + replacement + message[index + 1:]


async def relay(websocket, fault):
    global relayed
    members = ROOMS.setdefault(websocket.request.path, set())
    members.add(websocket)
    try:
        async for message in websocket:
            relayed += 1
            if relayed > FAULT_AFTER_MESSAGES:
                if fault == "crash-mid-run":
                    print("faulty server: crashing on purpose mid-run", file=sys.stderr, flush=True)
                    os._exit(3)
                if fault == "hang-mid-run":
                    print("faulty server: no longer relaying", file=sys.stderr, flush=True)
                    continue
                if fault == "hang-room-p1-mid-run" and websocket.request.path.split("?")[0].endswith("-p1"):
                    continue  # the second of --pairs N stalls; every other room is relayed as ever
                if fault == "corrupt-mid-run":
                    message = message[::-1] if len(message) > 1 else ("x" if isinstance(message, str) else b"x")
                if fault == "flip-one-byte-mid-run":
                    message = flip_one_byte(message)
            for other in tuple(members):
                if other is not websocket:
                    try:
                        await other.send(message)
                    except ConnectionClosed:
                        pass
    finally:
        members.discard(websocket)


async def main(args):
    if args.fault == "crash-at-start":
        print("faulty server: crashing on purpose at start", file=sys.stderr, flush=True)
        sys.exit(3)
    if args.fault == "never-ready":
        print("faulty server: never listening", file=sys.stderr, flush=True)
        while True:
            time.sleep(1)
    # elsewhere: a port the kernel picks (the requested one + 1 was sometimes taken by a client's connection here)
    port = 0 if args.fault == "binds-elsewhere" else args.port
    stop = asyncio.get_running_loop().create_future()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signal_number, lambda: stop.done() or stop.set_result(None))
    async with serve(lambda ws: relay(ws, args.fault), args.host, port, compression=None):
        await stop


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
