"""Ping-pong relay server on Sanic, started with app.run() as Sanic's documentation shows.

Sanic serves from a worker process that re-imports this module, so the app is built at import time from the
command line (the worker sees the same sys.argv).
"""

from sanic import Request, Sanic
from sanic.server.websockets.impl import WebsocketImplProtocol

from pingpong.kit import sanic_manager, server_support

# Sanic's websocket implementation has no permessage-deflate: it never negotiates compression.
ARGS = server_support.parse_args(__doc__, compression_choices=("default", "off"))
SETTINGS = {
    "compression_effective": False,
    "websocket_ping_interval": None,  # keepalive pings off, for every server of the suite
    "websocket_max_size": 2**20,
    "use_uvloop": {"auto": "sanic default (uvloop when installed)", "asyncio": False, "uvloop": True}[ARGS.loop],
}

app = Sanic("pingpong_relay")
app.config.WEBSOCKET_PING_INTERVAL = None
app.config.MOTD = False
if ARGS.loop != "auto":
    app.config.USE_UVLOOP = ARGS.loop == "uvloop"
ROOMS: dict[str, set] = {}


@app.before_server_start
async def report(app: Sanic) -> None:
    server_support.write_server_info("sanic", ["sanic"], ARGS, SETTINGS)


@app.on_request
async def once_stoppable(request: Request) -> None:
    """A handshake is answered once a stop can no longer be lost (kit/sanic_manager.py): the first handshake is the
    orchestrator's sign that the server is ready, and a stop right after it otherwise hung until killed (10 of 10)."""
    await sanic_manager.wait_until_stoppable(request.app)


async def relay(request: Request, websocket: WebsocketImplProtocol, room: str = "") -> None:
    """Send every message to the other connections of the sender's room, with the same type and bytes."""
    members = ROOMS.setdefault(server_support.room_of(request.path), set())
    members.add(websocket)
    try:
        async for message in websocket:
            for other in tuple(members):
                if other is not websocket:
                    await other.send(message)
    finally:
        members.discard(websocket)


app.add_websocket_route(relay, "/", name="relay_default_room")
app.add_websocket_route(relay, "/<room:path>", name="relay_named_room")

if __name__ == "__main__":
    app.run(host=ARGS.host, port=ARGS.port, access_log=False,
            ssl={"cert": ARGS.tls_cert, "key": ARGS.tls_key} if ARGS.tls_cert else None)
