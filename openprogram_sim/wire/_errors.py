"""Each API's HTTP errors: the status -> error type catalog and the error bodies."""

from __future__ import annotations

from typing import Any

from openprogram_sim.wire._plan import JSON_TYPE, WireResponse, json_text

__all__ = ["ERROR_CATALOG", "error_kind", "error_response"]


ERROR_CATALOG: dict[str, dict[int, tuple[str, str]]] = {
    # status -> (type or status name, code) as each API reports it
    "openai": {
        400: ("invalid_request_error", "invalid_request_error"),
        401: ("invalid_request_error", "invalid_api_key"),
        403: ("invalid_request_error", "unsupported_country_region_territory"),
        404: ("invalid_request_error", "model_not_found"),
        429: ("requests", "rate_limit_exceeded"),
        500: ("server_error", ""),
        503: ("service_unavailable_error", "server_is_overloaded"),
    },
    "anthropic": {
        400: ("invalid_request_error", ""),
        401: ("authentication_error", ""),
        403: ("permission_error", ""),
        404: ("not_found_error", ""),
        413: ("request_too_large", ""),
        429: ("rate_limit_error", ""),
        500: ("api_error", ""),
        529: ("overloaded_error", ""),
    },
    "gemini": {
        400: ("INVALID_ARGUMENT", ""),
        403: ("PERMISSION_DENIED", ""),
        404: ("NOT_FOUND", ""),
        429: ("RESOURCE_EXHAUSTED", ""),
        500: ("INTERNAL", ""),
        503: ("UNAVAILABLE", ""),
        504: ("DEADLINE_EXCEEDED", ""),
    },
    "bedrock": {
        400: ("ValidationException", "validationException"),
        403: ("AccessDeniedException", "accessDeniedException"),
        404: ("ResourceNotFoundException", "resourceNotFoundException"),
        408: ("ModelTimeoutException", "modelTimeoutException"),
        424: ("ModelErrorException", "modelStreamErrorException"),
        429: ("ThrottlingException", "throttlingException"),
        500: ("InternalServerException", "internalServerException"),
        503: ("ServiceUnavailableException", "serviceUnavailableException"),
    },
}
"""What each API calls an error of a given HTTP status (its error ``type``/``status``/
exception name). A status missing here gets the entry of 500 (>= 500) or 400."""


def _family(api: str) -> str:
    return "openai" if api.startswith("openai") else api


def error_kind(api: str, status: int) -> tuple[str, str]:
    table = ERROR_CATALOG[_family(api)]
    return table.get(status) or table[500 if status >= 500 else 400]


def error_response(
    api: str,
    status: int,
    message: str,
    *,
    should_retry: bool | None = None,
    retry_after: int | None = None,
) -> WireResponse:
    """The HTTP error ``api`` answers with for ``status``: its error body shape, its error
    type for that status, and the headers that go with it (``retry-after`` on 429,
    ``x-amzn-ErrorType`` on Bedrock). ``should_retry`` adds ``x-should-retry`` (the header
    the official SDKs obey before their own retry rules); ``retry_after`` sets
    ``retry-after`` (seconds) on any status."""
    kind, code = error_kind(api, status)
    family = _family(api)
    headers = {"content-type": JSON_TYPE}
    if status == 429 or retry_after is not None:
        headers["retry-after"] = str(1 if retry_after is None else retry_after)
    if should_retry is not None:
        headers["x-should-retry"] = "true" if should_retry else "false"
    body: Any
    if family == "openai":
        body = {"error": {"message": message, "type": kind, "param": None, "code": code or None}}
    elif family == "anthropic":
        body = {
            "type": "error",
            "error": {"type": kind, "message": message},
            "request_id": "req_wire",
        }
    elif family == "gemini":
        body = {"error": {"code": status, "message": message, "status": kind}}
        headers["content-type"] = "application/json; charset=UTF-8"
    else:
        body = {"message": message}
        headers["x-amzn-errortype"] = f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"
    return WireResponse(status, headers, [json_text(body).encode()])
