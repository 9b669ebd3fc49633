"""An SSE stream whose line never ends (issue 23, item 1): the decoder holds at most 16 Mi
characters of one line or one event, and the adapter ends the call in an error stop that
says so, having stopped reading, instead of buffering the stream without end."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from openprogram import Runtime
from openprogram.errors import ModelError
from openprogram.providers import get_provider
from openprogram.providers._sse import MAX_LINE, SSEDecoder, SSEEvent, SSELimitError

CHUNK = b"a" * 65536


def test_the_decoder_refuses_a_line_past_the_limit_fed_in_pieces() -> None:
    decoder = SSEDecoder()
    decoder.feed(b"data: ")
    fed = 6
    with pytest.raises(SSELimitError) as caught:
        while fed < 2 * MAX_LINE:
            fed += len(CHUNK)
            decoder.feed(CHUNK)
    assert MAX_LINE < fed <= MAX_LINE + len(CHUNK)  # it stopped at the limit
    assert str(caught.value) == (
        "sent an SSE line longer than 16,777,216 characters, the adapters' fixed limit "
        f"({fed:,} read); the stream was not read further"
    )


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_the_decoder_refuses_one_long_line_in_one_chunk(ending: str) -> None:
    line = "data: " + "a" * MAX_LINE + ending + ending
    with pytest.raises(SSELimitError, match="SSE line longer than 16,777,216 characters"):
        SSEDecoder().feed(line.encode())


def test_the_decoder_refuses_an_event_of_endless_data_lines() -> None:
    decoder = SSEDecoder()
    line = b"data: " + b"b" * 1000 + b"\n"
    with pytest.raises(SSELimitError, match=r"SSE event \(data: lines with no blank line\)"):
        for _ in range(MAX_LINE // 1000 + 2):
            decoder.feed(line)


def test_a_long_line_under_the_limit_is_read() -> None:
    text = "x" * (4 * 1024 * 1024)  # a base64 image in one line is this long
    events = SSEDecoder().feed(f"data: {text}\n\n".encode())
    assert events == [SSEEvent("message", text)]


@contextmanager
def _endless_line() -> Iterator[tuple[str, list[int]]]:
    """A loopback server answering with an SSE line that never ends: it writes until the
    client hangs up; yields the base URL and the bytes it managed to send."""
    listener = socket.create_server(("127.0.0.1", 0))
    sent = [0]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            frame = b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK)
            try:
                conn.sendall(b"6\r\ndata: \r\n")
                while sent[0] < 1024 * 1024 * 1024:  # 1 GB: far past any limit
                    conn.sendall(frame)
                    sent[0] += len(CHUNK)
            except OSError:
                pass  # the client hung up

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", sent
    finally:
        thread.join(timeout=10)
        listener.close()


def test_a_live_stream_with_an_endless_line_ends_in_an_error_stop() -> None:
    with _endless_line() as (base_url, sent):
        provider = get_provider("openai:gpt-4o-mini", base_url=base_url, api_key="k" * 20)
        with pytest.raises(ModelError) as caught:
            Runtime(provider=provider).exec("hi", tools=[])
    assert (
        "OpenAI sent an SSE line longer than 16,777,216 characters, the adapters' fixed limit"
        in str(caught.value)
    )
    # the adapter stopped reading at the limit (plus what the sockets held in flight)
    assert sent[0] < MAX_LINE + 8 * 1024 * 1024, sent[0]
