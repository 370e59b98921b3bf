"""Ping-pong client driver on aiohttp's client (ClientSession.ws_connect)."""

import aiohttp

from pingpong.kit import driver


def settings(args):
    return {
        # ws_connect(compress=0) is aiohttp's default: it does not offer permessage-deflate.
        "compression_offered": args.compression == "on",
        "heartbeat": None,  # keepalive pings off, for every implementation of the suite
        "max_msg_size": 4 * 2**20,
    }


SESSIONS: list[aiohttp.ClientSession] = []  # one session for every connection, as aiohttp's docs advise


async def open_connection(url, args):
    if not SESSIONS:
        # limit=0: a WebSocket holds its connector slot, and --pairs may open more than the default 100
        SESSIONS.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
    websocket = await SESSIONS[0].ws_connect(url, compress=15 if args.compression == "on" else 0, heartbeat=None,
                                             ssl=driver.client_ssl_context(args) or True)

    async def close():
        await websocket.close()

    text = args.payload_kind != "binary"
    return driver.Connection(
        send=websocket.send_str if text else websocket.send_bytes,
        recv=websocket.receive_str if text else websocket.receive_bytes,
        close=close,
        details={
            "extensions": websocket._response.headers.get("Sec-WebSocket-Extensions"),
            "subprotocol": websocket.protocol,
            **driver.socket_details(websocket.get_extra_info("socket")),
        },
    )


if __name__ == "__main__":
    async def close_session():
        for session in SESSIONS:
            await session.close()

    driver.main("aiohttp", ["aiohttp"], open_connection, settings, shutdown=close_session)
