"""Ping-pong relay server on Sanic with --workers N worker processes, app.run(workers=N) as Sanic's documentation
shows; a room's members on other workers are reached through the Redis broker of --broker (worker_rooms.py).

Every worker re-imports this module (Sanic's worker manager starts them), so the app is built at import time from the
command line, as in servers/sanic_server.py. With --worker-ports, each worker also serves a port of its own (the
lowest of PORT+1..PORT+N it can bind: Sanic does not number its workers) through app.create_server, Sanic's
low-level API for a server on a running loop.
"""

import asyncio

from sanic import Request, Sanic
from sanic.server.websockets.impl import WebsocketImplProtocol

from pingpong.kit import sanic_manager, server_support
from pingpong.kit.worker_rooms import WorkerRooms

ARGS = server_support.parse_args(__doc__, compression_choices=("default", "off"), workers=True)
SETTINGS = {
    "compression_effective": False,
    "websocket_ping_interval": None,  # keepalive pings off, for every server of the suite
    "websocket_max_size": 2**20,
    "use_uvloop": {"auto": "sanic default (uvloop when installed)", "asyncio": False, "uvloop": True}[ARGS.loop],
    "workers": ARGS.workers,
    "worker_manager": "sanic app.run(workers=N)",
    "broker": "redis pub/sub (redis-py asyncio), a channel per room subscribed while a member is here" if ARGS.broker else None,
}

app = Sanic("pingpong_relay_workers")
app.config.WEBSOCKET_PING_INTERVAL = None
app.config.MOTD = False
if ARGS.loop != "auto":
    app.config.USE_UVLOOP = ARGS.loop == "uvloop"
ROOMS = WorkerRooms(ARGS.broker, lambda member, message: member.send(message))
TLS = {"cert": ARGS.tls_cert, "key": ARGS.tls_key} if ARGS.tls_cert else None


@app.before_server_start
async def start(app: Sanic) -> None:
    await ROOMS.start()
    server_support.write_server_info("sanic-workers", ["sanic"] + (["redis"] if ARGS.broker else []), ARGS, SETTINGS)


@app.after_server_start
async def announce_when_stoppable(app: Sanic) -> None:
    """Say the worker serves (ROOMS.serving: the word the orchestrator waits for from every worker before it measures
    or stops anything) once a stop can no longer be lost, in a background task (app.add_task), as Sanic goes on."""
    app.add_task(serving(app))


async def serving(app: Sanic) -> None:
    """Said once a stop can no longer be lost (kit/sanic_manager.py): said any earlier, 5 of 60 stops under 3 busy
    loops on 2 CPUs hung (results/reference/2026-11-28-sanic-workers-stops.json.xz)."""
    await sanic_manager.wait_until_stoppable(app)
    ROOMS.serving()


@app.after_server_stop
async def stop(app: Sanic) -> None:
    await ROOMS.stop()


@app.on_request
async def enter_room(request: Request) -> None:
    """Join the room across the workers before Sanic answers the handshake (its request middleware runs first)."""
    await ROOMS.enter(server_support.room_of(request.path))
    request.ctx.room_held = True


@app.on_response
async def release_room(request: Request, response) -> None:
    """A request answered without reaching the handler (a failed handshake) gives its room back."""
    if getattr(request.ctx, "room_held", False):
        request.ctx.room_held = False
        await ROOMS.leave(server_support.room_of(request.path), None)


OWN_SERVERS: list = []  # --worker-ports: this worker's server on its own port


@app.before_server_start
async def serve_own_port(app: Sanic) -> None:
    """--worker-ports: serve the app on this worker's own port too, beside the port its workers share."""
    if not ARGS.worker_ports:
        return
    listener = server_support.worker_port_socket(ARGS)
    ROOMS.own_port = listener.getsockname()[1]
    OWN_SERVERS.append(await app.create_server(sock=listener, return_asyncio_server=True, access_log=False,
                                               ssl=TLS))


@app.before_server_stop
async def close_own_port(app: Sanic) -> None:
    """Close the own port's server and its connections, as Sanic does with the shared port's."""
    for server in OWN_SERVERS:
        closed = server.close()
        for connection in list(server.connections):
            connection.close()
        if closed is not None:
            await closed


async def relay(request: Request, websocket: WebsocketImplProtocol, room: str = "") -> None:
    """Send every message to the other connections of the sender's room, here and on the other workers."""
    room = server_support.room_of(request.path)
    request.ctx.room_held = False  # handed to this member: leave() below gives it back
    ROOMS.join(room, websocket)
    try:
        async for message in websocket:
            await ROOMS.relay(room, websocket, message)
    finally:
        await ROOMS.leave(room, websocket)


app.add_websocket_route(relay, "/", name="relay_default_room")
app.add_websocket_route(relay, "/<room:path>", name="relay_named_room")

if __name__ == "__main__":
    app.run(host=ARGS.host, port=ARGS.port, access_log=False, workers=ARGS.workers,
            ssl=TLS)
