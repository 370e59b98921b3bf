"""Ping-pong relay server on aiohttp.web, started with web.run_app as aiohttp's documentation shows."""

import weakref

from aiohttp import WSCloseCode, WSMsgType, web

from pingpong.kit import server_support

ROOMS = web.AppKey("rooms", dict)
ALL_WEBSOCKETS = web.AppKey("all_websockets", weakref.WeakSet)
COMPRESS = web.AppKey("compress", bool)


async def relay(request: web.Request) -> web.WebSocketResponse:
    """Send every message to the other connections of the sender's room, with the same type and bytes."""
    websocket = web.WebSocketResponse(compress=request.app[COMPRESS], heartbeat=None)
    await websocket.prepare(request)
    request.app[ALL_WEBSOCKETS].add(websocket)
    members = request.app[ROOMS].setdefault(server_support.room_of(request.path), set())
    members.add(websocket)
    try:
        async for message in websocket:
            if message.type == WSMsgType.TEXT:
                for other in tuple(members):
                    if other is not websocket and not other.closed:
                        await other.send_str(message.data)
            elif message.type == WSMsgType.BINARY:
                for other in tuple(members):
                    if other is not websocket and not other.closed:
                        await other.send_bytes(message.data)
    except ConnectionResetError:
        pass
    finally:
        members.discard(websocket)
    return websocket


async def close_websockets(app: web.Application) -> None:
    """The graceful-shutdown hook from aiohttp's documentation: close open websockets on exit."""
    for websocket in set(app[ALL_WEBSOCKETS]):
        await websocket.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown")


def build_app(args) -> web.Application:
    settings = {
        # WebSocketResponse(compress=True) is aiohttp's default: it accepts permessage-deflate when offered.
        "compression_effective": args.compression != "off",
        "heartbeat": None,  # keepalive pings off, for every server of the suite
        "max_msg_size": 4 * 2**20,
    }
    app = web.Application()
    app[COMPRESS] = settings["compression_effective"]
    app[ROOMS] = {}
    app[ALL_WEBSOCKETS] = weakref.WeakSet()

    async def report(app: web.Application) -> None:
        server_support.write_server_info("aiohttp", ["aiohttp"], args, settings)

    app.on_startup.append(report)
    app.on_shutdown.append(close_websockets)
    app.router.add_get("/{room:.*}", relay)
    return app


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__)
    LOOP = None
    if ARGS.loop == "uvloop":
        import uvloop

        LOOP = uvloop.new_event_loop()
    web.run_app(build_app(ARGS), host=ARGS.host, port=ARGS.port, loop=LOOP, access_log=None,
                print=server_support.log, ssl_context=server_support.ssl_context(ARGS))
