"""pingpong/kit/worker_rooms.py against a real redis-server: a join or a leave on the broker whose caller is
cancelled as soon as it waits still ends, so no room is left on the broker (Sanic cancels a websocket handler when
its connection is lost, which may come while the handler's `finally` is leaving its room)."""

import asyncio

import pytest
import redis

from pingpong import contract
from pingpong.harness.system import broker as broker_module
from pingpong.kit.worker_rooms import WorkerRooms

pytestmark = pytest.mark.skipif(broker_module.redis_server_path() is None, reason="no redis-server")


@pytest.fixture
def broker(tmp_path):
    started = broker_module.start_broker(tmp_path)
    try:
        yield started
    finally:
        started.stop()


def rooms_on(client: redis.Redis, room: str) -> tuple[set[bytes], int]:
    """The workers in the room's set and the subscribers of its channel."""
    key = contract.BROKER_WORKERS_KEY_PREFIX + room
    return client.smembers(key), client.pubsub_numsub(contract.BROKER_CHANNEL_PREFIX + room)[0][1]


async def cancelled_at_its_first_pause(change) -> None:
    """Run change as a task and cancel it as soon as it first waits (on the broker)."""
    task = asyncio.get_running_loop().create_task(change)
    await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


@pytest.mark.parametrize("cut_short", ["leave", "enter"])
def test_a_join_or_leave_whose_caller_is_cancelled_still_ends_and_leaves_nothing_on_the_broker(broker, cut_short):
    client = redis.Redis(unix_socket_path=str(broker.socket_path))
    origin = None

    async def scenario() -> dict:
        nonlocal origin
        rooms = WorkerRooms(broker.url, lambda member, message: asyncio.sleep(0))
        await rooms.start()
        origin = rooms.origin
        member = object()
        if cut_short == "enter":
            await cancelled_at_its_first_pause(rooms.enter("/room"))  # the handshake's request dropped meanwhile
        else:
            await rooms.enter("/room")
            rooms.join("/room", member)
            assert rooms_on(client, "/room") == ({origin}, 1)
            await cancelled_at_its_first_pause(rooms.leave("/room", member))
        for _ in range(500):  # the change goes on in the background: wait for its end
            if rooms_on(client, "/room") == (set(), 0) and not rooms.others:
                break
            await asyncio.sleep(0.01)
        left_while_serving = rooms_on(client, "/room")
        counts = dict(rooms.counts)
        await rooms.stop()
        return left_while_serving, counts

    left_while_serving, counts = asyncio.run(scenario())
    assert left_while_serving == (set(), 0)  # not only once stop() has closed its connections
    assert rooms_on(client, "/room") == (set(), 0)
    assert counts["broker_joins"] == 1 and counts["broker_leaves"] == 1, counts
    client.close()
