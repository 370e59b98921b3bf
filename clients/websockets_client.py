"""Ping-pong client driver on websockets' asyncio implementation (websockets.asyncio.client.connect).

Releases before 13.0 (websockets 12.0 of November 2023, in the seed's own set-up: run_bench.py --setup lemire-2023)
have only what is now the legacy implementation, websockets.connect, with the same arguments: that is what a
program of that time used, and what runs here on them. The report's settings name which one ran.
"""

try:
    from websockets.asyncio.client import connect

    API = "asyncio"
except ImportError:  # websockets < 13.0
    from websockets import connect

    API = "legacy"

from pingpong.kit import driver

PING_INTERVAL = None  # keepalive pings off, for every implementation of the suite


def settings(args):
    return {
        # connect(compression="deflate") is websockets' default: it offers permessage-deflate.
        "compression_offered": args.compression != "off",
        "ping_interval": PING_INTERVAL,
        "max_size": 2**20,
        "max_queue": 16,
        "websockets_api": API,
    }


async def open_connection(url, args):
    websocket = await connect(url, compression=None if args.compression == "off" else "deflate",
                              ping_interval=PING_INTERVAL, ssl=driver.client_ssl_context(args))
    return driver.Connection(
        send=websocket.send,
        recv=websocket.recv,
        close=websocket.close,
        details={
            "extensions": (websocket.response.headers if API == "asyncio" else websocket.response_headers).get(
                "Sec-WebSocket-Extensions"),
            "subprotocol": websocket.subprotocol,
            **driver.socket_details(websocket.transport.get_extra_info("socket")),
        },
    )


if __name__ == "__main__":
    driver.main("websockets", ["websockets"], open_connection, settings)
