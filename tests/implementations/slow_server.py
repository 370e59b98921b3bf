"""A deliberately slow relay for tests: every message costs a fixed service time (a busy wait on the event loop).

At 2 ms a message and two messages a roundtrip, it serves at most ~250 roundtrips/s: an open-loop client offering
more must see its latency (from the intended send time) grow with the queue, which is what the saturation tests
check. The relay itself is correct, so verification passes.
"""

import time

from websockets.asyncio.server import serve
from websockets.exceptions import ConnectionClosed

from pingpong.kit import server_support

SERVICE_TIME_S = 0.002
SPINS_PER_CLOCK_READ = 200  # a few µs between clock reads: the busy wait overshoots by no more than that
ROOMS: dict[str, set] = {}


def spend_service_time() -> None:
    """CPU work, as a slow handler would do: a busy wait of SERVICE_TIME_S (its name is looked for in profiles)."""
    busy_until = time.perf_counter() + SERVICE_TIME_S
    while time.perf_counter() < busy_until:
        for _ in range(SPINS_PER_CLOCK_READ):  # most of the time in this function's own bytecode, not the clock's
            pass


async def relay(websocket):
    members = ROOMS.setdefault(server_support.room_of(websocket.request.path), set())
    members.add(websocket)
    try:
        async for message in websocket:
            spend_service_time()
            for other in tuple(members):
                if other is not websocket:
                    await other.send(message)
    except ConnectionClosed:
        pass
    finally:
        members.discard(websocket)


async def main(args):
    stop = server_support.stop_requested()
    async with serve(relay, args.host, args.port, compression=None, ping_interval=None):
        server_support.write_server_info("slow-relay", ["websockets"], args, {"service_time_s": SERVICE_TIME_S})
        await stop


if __name__ == "__main__":
    server_support.run(main, server_support.parse_args(__doc__, compression_choices=("default", "off")))
