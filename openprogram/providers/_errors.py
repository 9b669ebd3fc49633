"""Failed calls, as the wire adapters report them: the text, the details, and the secrets.

* :func:`http_error` reads a non-2xx answer: its one-line text and its
  :class:`~openprogram.types.ErrorDetails` (reason, status, retryable, retry-after).
* :func:`details_for_codes` classifies an error that arrived inside a 2xx answer by the
  codes it carries; :func:`transport_details` classifies an ``httpx2`` exception.
* :func:`carried_error` finds an error, in any of the five APIs' shapes, in a body that
  should have been a reply.
* :class:`Redactor` masks every form of every credential an adapter holds, and
  :func:`clip` cuts an error text; :class:`~openprogram.providers._http.HTTPProvider`
  applies both, in that order, to every error text it produces (the one place).
* :func:`check_key` refuses a key an HTTP header cannot carry, without showing it.

Limits (listed in ``docs/limits.md``): :data:`MAX_ERROR_BODY` bytes of an error body are
read; an error text is cut to :data:`MAX_ERROR_TEXT` characters.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx2

from openprogram.errors import ConfigurationError
from openprogram.types import ErrorDetails, ErrorReason

__all__ = [
    "MASK",
    "MAX_ERROR_BODY",
    "MAX_ERROR_TEXT",
    "Redactor",
    "carried_error",
    "check_key",
    "clip",
    "details_for_codes",
    "error_fields",
    "http_error",
    "transport_details",
]

MAX_ERROR_BODY = 64 * 1024
"""Bytes of a non-2xx body read for its error text; the rest is never read (a body that
never ends must not hold the call)."""
MAX_ERROR_TEXT = 1000
"""Characters of an error message; a longer one (a 5 MB message from a broken upstream)
is cut, saying how long it was."""
MASK = "***"
"""What a credential is replaced with in an error text."""

_MIN_SECRET = 4  # shorter "secrets" would mask ordinary words

_RETRYABLE: frozenset[ErrorReason] = frozenset(
    {"rate_limit", "overloaded", "server", "timeout", "network"}
)

# Provider error codes (lowercased) by reason: OpenAI types and codes, Anthropic error
# types, Gemini (gRPC) statuses, Bedrock exception names.
_CODES: dict[ErrorReason, tuple[str, ...]] = {
    "rate_limit": (
        "rate_limit_exceeded", "rate_limit_error", "insufficient_quota", "tokens", "requests",
        "resource_exhausted", "throttlingexception", "servicequotaexceededexception",
    ),
    "overloaded": (
        "overloaded_error", "server_is_overloaded", "service_unavailable_error", "unavailable",
        "serviceunavailableexception", "modelnotreadyexception",
    ),
    "server": (
        "server_error", "api_error", "internal", "internalserverexception",
        "modelerrorexception", "modelstreamerrorexception",
    ),
    "auth": (
        "authentication_error", "permission_error", "invalid_api_key", "unauthenticated",
        "permission_denied", "accessdeniedexception", "unrecognizedclientexception",
        "expiredtokenexception",
    ),
    "invalid_request": (
        "invalid_request_error", "not_found_error", "request_too_large", "invalid_prompt",
        "context_length_exceeded", "model_not_found", "invalid_argument", "not_found",
        "failed_precondition", "out_of_range", "validationexception",
        "resourcenotfoundexception",
    ),
    "timeout": ("timeout_error", "deadline_exceeded", "modeltimeoutexception"),
}  # fmt: skip
_CODE_REASONS = {code: reason for reason, codes in _CODES.items() for code in codes}
_NOT_RETRYABLE_CODES = frozenset({"insufficient_quota"})  # a spent quota stays spent
_ANTHROPIC_LIMITS = ("requests", "tokens", "input-tokens", "output-tokens")
_CREDENTIAL_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-amz-security-token",
        "cookie",
    }
)


# --------------------------------------------------------------------------- text


def clip(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    """``text``, cut to at most ``limit`` characters with a note of its full length."""
    if len(text) <= limit:
        return text
    note = f" [... cut: {len(text)} characters in all]"
    return text[: max(limit - len(note), 0)] + note


def _load_json(raw: str | bytes) -> Any:
    """Parsed JSON, or ``None`` for text that is not JSON or is nested too deeply."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def error_fields(data: Any, *, strict: bool = False) -> tuple[str, str] | None:
    """``(message, code)`` of an error body in any of the five APIs' shapes, else ``None``.

    ``{"error": {...}}`` (OpenAI, Gemini, Anthropic's ``type: error`` body), ``[{"error":
    ...}]`` (Gemini without SSE), ``{"message": ...}`` with the code in ``__type``/``code``
    (Bedrock). Without ``strict``, any object is read that way (an HTTP error body); with
    it, only an object with an ``error`` key or a string ``message`` counts.
    """
    if isinstance(data, list) and data:
        data = data[0]
    if not isinstance(data, dict):
        return None
    error = data.get("error", data)
    if isinstance(error, str) and error:
        return error, ""
    if not isinstance(error, dict):
        return None
    message = error.get("message") or error.get("Message") or ""
    if strict and error is data and not (isinstance(message, str) and message):
        return None  # neither an "error" key nor a Bedrock-style message: not an error
    # A symbolic code says more than a number that repeats the HTTP status (Gemini sends
    # both: code 404, status NOT_FOUND).
    raw_code = error.get("code")
    symbolic = error.get("type") or error.get("status") or data.get("__type")
    code: Any = raw_code
    if not (isinstance(raw_code, str) and raw_code and not raw_code.isdigit()):
        code = symbolic or raw_code
    return str(message), str(code) if code else ""


def carried_error(body: Any) -> tuple[str, str] | None:
    """``(message, code)`` of an error in any API's shape in a body that should have been
    a reply (a proxy or a misrouted call can answer 200 with one), else ``None``."""
    return error_fields(body, strict=True)


def http_error(
    provider: str,
    status: int,
    body: bytes | str,
    headers: Mapping[str, str] | None = None,
    *,
    now: float | None = None,
) -> tuple[str, ErrorDetails]:
    """One line for a failed HTTP call (status, the provider's code and message, or the
    start of a body that is not JSON, and ``retry-after``) and its details."""
    raw = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    data = _load_json(raw)
    fields = error_fields(data)
    message, code = fields if fields is not None else (raw.strip(), "")
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    # Bedrock names the error only in a header (e.g. "ThrottlingException:http://...").
    amzn = lowered.get("x-amzn-errortype", "").split(":", 1)[0]
    if amzn and (not code or code.isdigit()):
        code = amzn
    text = f"{provider} API error: HTTP {status}"
    if code:
        text += f" ({code})"
    if message:
        text += f": {message}"
    if lowered.get("retry-after"):
        text += f" (retry-after: {lowered['retry-after']})"
    reason = _code_reason(code) or _status_reason(status)
    retryable = reason in _RETRYABLE or status == 409
    if code.lower() in _NOT_RETRYABLE_CODES:
        retryable = False
    should_retry = lowered.get("x-should-retry", "").lower()
    if should_retry in ("true", "false"):
        retryable = should_retry == "true"
    wait = _retry_after(lowered, data, time.time() if now is None else now)
    # Not clipped here: a key echoed at the cut would leave a piece of it behind; the
    # caller redacts, then clips.
    return text, ErrorDetails(reason=reason, status=status, retryable=retryable, retry_after=wait)


# --------------------------------------------------------------------------- details


def details_for_codes(*codes: Any, default: ErrorReason = "other") -> ErrorDetails:
    """Details of an error reported inside a 2xx answer, from the first of ``codes`` that
    names a known kind (a numeric code is read as an HTTP status); ``status`` is ``None``
    because the answer itself succeeded."""
    reason: ErrorReason | None = None
    retryable = True
    for code in codes:
        text = str(code) if code is not None else ""
        reason = _code_reason(text)
        if reason is None and text.isdigit():
            reason = _status_reason(int(text))
            reason = None if reason == "other" else reason
        if reason is not None:
            retryable = text.lower() not in _NOT_RETRYABLE_CODES
            break
    reason = reason or default
    return ErrorDetails(reason=reason, retryable=retryable and reason in _RETRYABLE)


def transport_details(exc: BaseException) -> ErrorDetails:
    """Details of a call that got no (whole) answer."""
    if isinstance(exc, httpx2.TimeoutException):
        return ErrorDetails(reason="timeout", retryable=True)
    if isinstance(exc, httpx2.NetworkError | httpx2.RemoteProtocolError | httpx2.ProxyError):
        return ErrorDetails(reason="network", retryable=True)
    if isinstance(exc, httpx2.DecodingError):
        return ErrorDetails(reason="stream")
    return ErrorDetails(reason="other")


def _code_reason(code: str) -> ErrorReason | None:
    return _CODE_REASONS.get(code.lower()) if code else None


def _status_reason(status: int) -> ErrorReason:
    if status in (401, 403):
        return "auth"
    if status in (408, 504):
        return "timeout"
    if status == 429:
        return "rate_limit"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    if 400 <= status < 500 and status != 409:
        return "invalid_request"
    return "other"


def _retry_after(headers: Mapping[str, str], body: Any, now: float) -> float | None:
    """Seconds to wait, from the first of: OpenAI's ``retry-after-ms``, ``retry-after``
    (seconds or an HTTP date), Anthropic's reset time of an exhausted rate limit, Gemini's
    ``RetryInfo.retryDelay`` in the body."""
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = headers.get("retry-after", "").strip()
    if value:
        seconds = _number(value)
        if seconds is not None:
            return seconds
        when = _timestamp(value, http_date=True)
        if when is not None:
            return max(when - now, 0.0)
    resets = [
        _timestamp(headers.get(f"anthropic-ratelimit-{name}-reset", ""))
        for name in _ANTHROPIC_LIMITS
        if headers.get(f"anthropic-ratelimit-{name}-remaining", "").strip() == "0"
    ]
    known = [r for r in resets if r is not None]
    if known:
        return max(max(known) - now, 0.0)  # every exhausted limit must have reset
    return _gemini_retry_delay(body)


def _gemini_retry_delay(body: Any) -> float | None:
    if isinstance(body, list) and body:
        body = body[0]
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    for item in details if isinstance(details, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = str(item.get("retryDelay", ""))
            return _number(delay.removesuffix("s")) if delay.endswith("s") else None
    return None


def _number(value: str | None) -> float | None:
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _timestamp(value: str, *, http_date: bool = False) -> float | None:
    try:
        parsed = parsedate_to_datetime(value) if http_date else datetime.fromisoformat(value)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None:
        return None  # a time without a zone cannot be placed
    return parsed.timestamp()


# --------------------------------------------------------------------------- secrets


def check_key(key: str, *, provider: str, source: str) -> str:
    """``key`` without surrounding whitespace (a key read from a file keeps its newline).

    Raises :class:`~openprogram.errors.ConfigurationError`, naming ``source`` and a
    position but never showing the key, for a blank key or one holding a character an
    HTTP header cannot carry (a control character or a non-ASCII one).
    """
    stripped = key.strip()
    if not stripped:
        raise ConfigurationError(
            f"{provider}: {source} is blank (only whitespace); pass the key itself, or leave "
            "it unset to read it from the environment"
        )
    for position, char in enumerate(stripped, start=1):
        if ord(char) < 32 or ord(char) == 127:
            raise ConfigurationError(
                f"{provider}: {source} contains a control character (code {ord(char)}) at "
                f"character {position} of {len(stripped)}; an API key is printable ASCII. "
                "Whitespace around the key (e.g. a key file's last newline) is stripped, "
                "this is inside it: check how the key was read"
            )
        if ord(char) > 126:
            raise ConfigurationError(
                f"{provider}: {source} contains a non-ASCII character at character "
                f"{position} of {len(stripped)}; HTTP headers carry ASCII only, so it cannot "
                "be sent: check that the key was copied whole and unchanged"
            )
    return stripped


def credential_values(headers: Mapping[str, str]) -> Iterable[str]:
    """The secrets in user-given headers: the values of credential headers, and the part
    after an auth scheme (``Bearer x``, ``Basic x``)."""
    for name, value in headers.items():
        if name.lower() in _CREDENTIAL_HEADERS and value:
            yield value
            scheme, _, credential = value.strip().partition(" ")
            if credential and scheme.isalpha():
                yield credential.strip()


class Redactor:
    """Masks every form of every secret it was given: the text itself, its ``repr`` and
    its bytes ``repr`` (as in ``Illegal header value b'Bearer ...'``), its JSON escaping
    and its URL encoding. Secrets shorter than 4 characters are not masked."""

    __slots__ = ("_forms",)

    def __init__(self, *secrets: str | None) -> None:
        self._forms: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | None) -> None:
        """Mask ``secret`` too (e.g. SigV4 credentials, known once loaded)."""
        if not secret or len(secret) < _MIN_SECRET:
            return
        raw = secret.encode("utf-8", "backslashreplace")
        forms = {
            secret,
            repr(secret)[1:-1],
            repr(raw)[2:-1],
            json.dumps(secret)[1:-1],
            json.dumps(secret, ensure_ascii=False)[1:-1],
            quote(secret, safe=""),
        }
        self._forms.update(form for form in forms if len(form) >= _MIN_SECRET)

    def __call__(self, text: str) -> str:
        # Longest first: a form that contains another is masked whole.
        for form in sorted(self._forms, key=len, reverse=True):
            text = text.replace(form, MASK)
        return text
