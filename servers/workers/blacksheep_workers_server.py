"""Ping-pong relay server on BlackSheep with --workers N processes, served by uvicorn.run("module:app", workers=N)
as uvicorn's documentation shows (its supervisor starts the workers, which share the port); a room's members on
other workers are reached through the Redis broker of --broker (worker_rooms.py).

uvicorn's workers import the app by name, so it is built at import time from the command line (a spawned worker
gets the same sys.argv), as servers/workers/sanic_workers_server.py does. With --worker-ports, each worker also
serves a port of its own (the lowest of PORT+1..PORT+N it can bind: uvicorn does not number its workers) with a
second uvicorn.Server on its loop, as uvicorn's documentation shows for a server run from a running loop.
"""

import asyncio

import uvicorn
from blacksheep import Application, WebSocket, WebSocketDisconnectError
from blacksheep.server.routing import Router

from pingpong.kit import server_support
from pingpong.kit.worker_rooms import WorkerRooms

ARGS = server_support.parse_args(__doc__, workers=True)
SETTINGS = {
    "compression_effective": ARGS.compression != "off",
    "uvicorn_ws": "auto (websockets-sansio when websockets is installed)",
    "ws_ping_interval": None,  # keepalive pings off, for every server of the suite
    "ws_max_size": 16 * 2**20,
    "ws_max_queue": 32,
    "uvicorn_loop": ARGS.loop,
    "workers": ARGS.workers,
    "worker_manager": 'uvicorn.run("module:app", workers=N)',
    "broker": "redis pub/sub (redis-py asyncio), a channel per room subscribed while a member is here" if ARGS.broker else None,
}


async def send(websocket: WebSocket, message: str | bytes) -> None:
    await (websocket.send_text(message) if isinstance(message, str) else websocket.send_bytes(message))


ROOMS = WorkerRooms(ARGS.broker, send)


async def relay(websocket: WebSocket) -> None:
    """Send every message to the other connections of the sender's room, here and on the other workers."""
    room = server_support.room_of(websocket.url.path.decode())
    await ROOMS.enter(room)  # the room joined across the workers before the handshake is answered
    member = None
    try:
        await websocket.accept()
        member = websocket
        ROOMS.join(room, websocket)
        while True:
            message = await websocket.receive()
            text = message.get("text")
            await ROOMS.relay(room, websocket, text if text is not None else message["bytes"])
    except WebSocketDisconnectError:
        pass
    finally:
        await ROOMS.leave(room, member)


# a router of its own: a spawned worker imports this module twice (as __mp_main__ and by name), and two apps
# on blacksheep's shared default router would register the route twice
app = Application(router=Router())
app.router.add_ws("*", relay)


OWN_PORT_SERVERS: list[tuple[uvicorn.Server, asyncio.Task]] = []  # --worker-ports: this worker's own port's


def serve_own_port() -> None:
    """--worker-ports: serve the app on this worker's own port too, beside the port its workers share. The second
    server's serve() takes the SIGTERM first (it installs its handlers last) and, once stopped, raises it again for
    the worker's own server."""
    listener = server_support.worker_port_socket(ARGS)
    ROOMS.own_port = listener.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", ws_per_message_deflate=SETTINGS["compression_effective"],
                            ws_ping_interval=None, log_level="warning", ssl_certfile=ARGS.tls_cert,
                            ssl_keyfile=ARGS.tls_key)
    server = uvicorn.Server(config)
    OWN_PORT_SERVERS.append((server, asyncio.get_running_loop().create_task(server.serve(sockets=[listener]))))


async def stop_own_port() -> None:
    for server, serving in OWN_PORT_SERVERS:
        server.should_exit = True
        await serving


async def start(application: Application) -> None:
    await ROOMS.start()
    if ARGS.worker_ports:
        serve_own_port()
    ROOMS.serving()
    server_support.write_server_info("blacksheep-workers", ["blacksheep", "uvicorn", "websockets"]
                                     + (["redis"] if ARGS.broker else []), ARGS, SETTINGS)


async def stop(application: Application) -> None:
    await stop_own_port()
    await ROOMS.stop()


app.on_start += start
app.on_stop += stop

if __name__ == "__main__":
    uvicorn.run("servers.workers.blacksheep_workers_server:app", host=ARGS.host, port=ARGS.port, loop=ARGS.loop,
                workers=ARGS.workers, ws_per_message_deflate=SETTINGS["compression_effective"], ws_ping_interval=None,
                log_level="warning", ssl_certfile=ARGS.tls_cert, ssl_keyfile=ARGS.tls_key)
