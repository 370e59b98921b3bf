"""Ping-pong relay server on aiohttp.web with --workers N processes: a small launcher starts N processes, each
serving the same port with web.run_app(..., reuse_port=True) as aiohttp's deployment documentation shows for
several processes behind one port (the kernel's SO_REUSEPORT spreads the connections); a room's members on other
workers are reached through the Redis broker of --broker (worker_rooms.py). With --workers 1 the launcher serves
itself, as servers/aiohttp_server.py does. With --worker-ports, worker i also serves a port of its own, PORT+1+i
(run_app's sock=, beside its host and port).
"""

import multiprocessing
import signal
import weakref

from aiohttp import WSMsgType, web

from pingpong.kit import server_support
from pingpong.kit.worker_rooms import WorkerRooms
from servers.aiohttp_server import ALL_WEBSOCKETS, COMPRESS, close_websockets  # the single-process server's

ROOMS = web.AppKey("rooms", WorkerRooms)


async def send(websocket: web.WebSocketResponse, message: str | bytes) -> None:
    if not websocket.closed:
        await (websocket.send_str(message) if isinstance(message, str) else websocket.send_bytes(message))


async def relay(request: web.Request) -> web.WebSocketResponse:
    """Send every message to the other connections of the sender's room, here and on the other workers."""
    websocket = web.WebSocketResponse(compress=request.app[COMPRESS], heartbeat=None)
    rooms, room = request.app[ROOMS], server_support.room_of(request.path)
    await rooms.enter(room)  # the room joined across the workers before the handshake is answered
    member = None
    try:
        await websocket.prepare(request)
        request.app[ALL_WEBSOCKETS].add(websocket)
        member = websocket
        rooms.join(room, websocket)
        async for message in websocket:
            if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                await rooms.relay(room, websocket, message.data)
    except ConnectionResetError:
        pass
    finally:
        await rooms.leave(room, member)
    return websocket


def build_app(args, own_port: int | None = None) -> web.Application:
    settings = {
        "compression_effective": args.compression != "off",
        "heartbeat": None,  # keepalive pings off, for every server of the suite
        "max_msg_size": 4 * 2**20,
        "workers": args.workers,
        "worker_manager": "a launcher of N processes, each web.run_app(reuse_port=True)",
        "broker": "redis pub/sub (redis-py asyncio), a channel per room subscribed while a member is here" if args.broker else None,
    }
    app = web.Application()
    app[COMPRESS] = settings["compression_effective"]
    app[ROOMS] = WorkerRooms(args.broker, send)
    app[ROOMS].own_port = own_port
    app[ALL_WEBSOCKETS] = weakref.WeakSet()

    async def start(app: web.Application) -> None:
        await app[ROOMS].start()
        app[ROOMS].serving()
        server_support.write_server_info("aiohttp-workers", ["aiohttp"] + (["redis"] if args.broker else []), args,
                                         settings)

    async def stop(app: web.Application) -> None:
        await app[ROOMS].stop()

    app.on_startup.append(start)
    app.on_shutdown.append(close_websockets)
    app.on_cleanup.append(stop)
    app.router.add_get("/{room:.*}", relay)
    return app


def own_listener(args, index: int):
    """--worker-ports: worker `index`'s own listening socket, on PORT+1+index (None without the flag)."""
    return server_support.worker_port_socket(args, index) if args.worker_ports else None


def serve(args, index: int = 0) -> None:
    """Worker `index`: web.run_app on the shared port (SO_REUSEPORT when there are several), and its own port."""
    loop = None
    if args.loop == "uvloop":
        import uvloop

        loop = uvloop.new_event_loop()
    own = own_listener(args, index)
    web.run_app(build_app(args, own.getsockname()[1] if own else None), host=args.host, port=args.port, loop=loop,
                access_log=None, print=server_support.log, ssl_context=server_support.ssl_context(args),
                reuse_port=args.workers > 1, sock=own)


def launch(args) -> int:
    """Start the N workers and wait for them; on SIGTERM or SIGINT, stop them (SIGTERM) and wait again."""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=serve, args=(args, index), name=f"aiohttp-worker-{index}")
               for index in range(args.workers)]

    def stop_workers(signal_number, frame) -> None:
        for worker in workers:
            if worker.is_alive():
                worker.terminate()

    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, stop_workers)
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return max((abs(worker.exitcode or 0) for worker in workers if worker.exitcode != -signal.SIGTERM), default=0)


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__, workers=True)
    if ARGS.workers == 1:
        serve(ARGS)
    else:
        raise SystemExit(launch(ARGS))
