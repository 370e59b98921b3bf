"""Ping-pong client driver on picows (ws_connect with a WSListener).

picows calls back with frames; the shared driver awaits messages. The adapter below turns frames into awaitable
messages with one future per receive, the usual bridge from picows's callbacks to coroutines. That costs a little
against a pure-callback client, and it is the same await-based loop every Python client runs.
"""

import asyncio

from picows import WSListener, WSMsgType, WSTransport, ws_connect

from pingpong.kit import driver


class MessageListener(WSListener):
    """Reassembles frames into messages (str for text, bytes for binary) and hands them to recv()."""

    def __init__(self) -> None:
        self.transport: WSTransport | None = None
        self.queue = driver.MessageQueue()
        self.fragments: list[bytes] = []
        self.fragment_type = None
        self.closing = False  # our close frame is sent: the server's answer ends the connection

    def on_ws_connected(self, transport: WSTransport) -> None:
        self.transport = transport

    def on_ws_frame(self, transport: WSTransport, frame) -> None:
        msg_type = frame.msg_type
        if msg_type == WSMsgType.CLOSE:
            if self.closing:  # the answer to our close frame: the server now closes the TCP connection first
                return
            transport.send_close(frame.get_close_code())  # the server closes: answer with its code (RFC 6455 5.5.1)
            transport.disconnect()
            return
        if msg_type == WSMsgType.CONTINUATION or not frame.fin:
            if msg_type != WSMsgType.CONTINUATION:
                self.fragment_type = msg_type
            self.fragments.append(frame.get_payload_as_bytes())
            if not frame.fin:
                return
            data, msg_type = b"".join(self.fragments), self.fragment_type
            self.fragments = []
        elif msg_type == WSMsgType.TEXT or msg_type == WSMsgType.BINARY:
            data = frame.get_payload_as_bytes()
        else:
            return
        self.queue.deliver(data.decode() if msg_type == WSMsgType.TEXT else data)

    def on_ws_disconnected(self, transport: WSTransport) -> None:
        self.queue.fail(ConnectionError("connection closed by the server"))


CLOSE_TIMEOUT_S = 10.0  # how long close() waits for the server to end the connection (websockets' close_timeout)


def settings(args):
    return {"compression_offered": False, "auto_ping": False, "max_frame_size": 10 * 2**20}


async def open_connection(url, args):
    if args.compression == "on":
        raise driver.DriverError("picows does not support permessage-deflate")
    transport, listener = await ws_connect(MessageListener, url, enable_auto_ping=False,
                                           ssl_context=driver.client_ssl_context(args))
    text_type, binary_type = WSMsgType.TEXT, WSMsgType.BINARY
    send_frame = transport.send

    async def send(payload):
        send_frame(text_type if isinstance(payload, str) else binary_type, payload)

    async def close():
        """The closing handshake as the other clients do it: send a close frame, wait for the server's answer and
        for the server to close the TCP connection (RFC 6455 7.1.1), as long as CLOSE_TIMEOUT_S."""
        listener.closing = True
        transport.send_close()
        try:
            await asyncio.wait_for(transport.wait_disconnected(), CLOSE_TIMEOUT_S)
        except asyncio.TimeoutError:  # no answer: give up on the handshake, as websockets' close_timeout does
            transport.disconnect()
            await transport.wait_disconnected()

    return driver.Connection(
        send=send,
        recv=listener.queue.recv,
        close=close,
        details={
            "extensions": transport.response.headers.get("Sec-WebSocket-Extensions"),
            "subprotocol": transport.response.headers.get("Sec-WebSocket-Protocol"),
            **driver.socket_details(transport.underlying_transport.get_extra_info("socket")),
        },
    )


if __name__ == "__main__":
    driver.main("picows", ["picows"], open_connection, settings)
