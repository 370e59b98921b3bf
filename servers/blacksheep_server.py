"""Ping-pong relay server on BlackSheep, served by uvicorn (uvicorn.run, as both projects document)."""

import uvicorn
from blacksheep import Application, WebSocket, WebSocketDisconnectError

from pingpong.kit import server_support

ROOMS: dict[str, set] = {}


async def relay(websocket: WebSocket) -> None:
    """Send every message to the other connections of the sender's room, with the same type and bytes."""
    await websocket.accept()
    members = ROOMS.setdefault(server_support.room_of(websocket.url.path.decode()), set())
    members.add(websocket)
    try:
        while True:
            message = await websocket.receive()
            text = message.get("text")
            for other in tuple(members):
                if other is not websocket:
                    if text is not None:
                        await other.send_text(text)
                    else:
                        await other.send_bytes(message["bytes"])
    except WebSocketDisconnectError:
        pass
    finally:
        members.discard(websocket)


def build_app(args, settings) -> Application:
    app = Application()
    app.router.add_ws("*", relay)

    async def report(application: Application) -> None:
        server_support.write_server_info("blacksheep", ["blacksheep", "uvicorn", "websockets"], args, settings)

    app.on_start += report
    return app


if __name__ == "__main__":
    ARGS = server_support.parse_args(__doc__)
    SETTINGS = {
        # uvicorn offers permessage-deflate by default (ws_per_message_deflate=True).
        "compression_effective": ARGS.compression != "off",
        "uvicorn_ws": "auto (websockets-sansio when websockets is installed)",
        "ws_ping_interval": None,  # keepalive pings off, for every server of the suite
        "ws_max_size": 16 * 2**20,
        "ws_max_queue": 32,
        "uvicorn_loop": ARGS.loop,
    }
    uvicorn.run(build_app(ARGS, SETTINGS), host=ARGS.host, port=ARGS.port, loop=ARGS.loop,
                ws_per_message_deflate=SETTINGS["compression_effective"], ws_ping_interval=None,
                log_level="warning", ssl_certfile=ARGS.tls_cert, ssl_keyfile=ARGS.tls_key)
