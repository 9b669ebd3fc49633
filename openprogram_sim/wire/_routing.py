"""Which API a request is for, from its path and body (the routes the real services use)."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["model_of", "route"]


def route(path: str, body: Any) -> tuple[str, bool] | None:
    """Which API (and whether streaming) a request is for, from its path and JSON body:
    ``/chat/completions``, ``/responses``, ``/messages`` (``"stream": true`` in the body),
    ``/models/{m}:generateContent`` / ``:streamGenerateContent``,
    ``/model/{id}/converse`` / ``/converse-stream``. ``None`` for anything else."""
    path = unquote(urlsplit(path).path).rstrip("/")
    wants_stream = isinstance(body, dict) and body.get("stream") is True
    if path.endswith("/chat/completions"):
        return "openai-chat", wants_stream
    if path.endswith("/responses"):
        return "openai-responses", wants_stream
    if path.endswith("/messages"):
        return "anthropic", wants_stream
    if path.endswith(":streamGenerateContent"):
        return "gemini", True
    if path.endswith(":generateContent"):
        return "gemini", False
    if path.endswith("/converse-stream"):
        return "bedrock", True
    if path.endswith("/converse"):
        return "bedrock", False
    return None


def model_of(api: str, path: str, body: Any) -> str:
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    path = unquote(urlsplit(path).path)
    if api == "gemini":
        return path.rpartition("/models/")[2].partition(":")[0] or "scripted"
    if api == "bedrock":
        return path.rpartition("/model/")[2].rpartition("/")[0] or "scripted"
    return "scripted"
