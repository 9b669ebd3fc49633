"""AWS for the Bedrock adapter: the region, botocore's credential chain and SigV4 signing
(botocore is the optional ``aws`` extra, imported only when needed)."""

from __future__ import annotations

import os
from typing import Any

import httpx2

from openprogram.errors import ConfigurationError

__all__ = [
    "REGION_ENV_VARS",
    "TOKEN_ENV_VAR",
    "load_credentials",
    "resolve_region",
    "sigv4_headers",
]

TOKEN_ENV_VAR = "AWS_BEARER_TOKEN_BEDROCK"
REGION_ENV_VARS = ("AWS_REGION", "AWS_DEFAULT_REGION")


def resolve_region(region: str | None, *, required: bool) -> str:
    if region:
        return region
    for name in REGION_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    try:
        import botocore.session
    except ImportError:
        found = None
    else:
        found = botocore.session.Session().get_config_variable("region")
    if found:
        return str(found)
    if not required:
        return "us-east-1"  # only used to sign requests to a custom base_url
    raise ConfigurationError(
        "Bedrock: no AWS region. Set the AWS_REGION (or AWS_DEFAULT_REGION) environment "
        "variable, or pass region=..."
    )


def load_credentials(*, required: bool) -> Any:
    """botocore's credentials (None when unavailable and not ``required``)."""
    hint = (
        f"set {TOKEN_ENV_VAR} (a Bedrock API key), or AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) for SigV4 signing"
    )
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        if not required:
            return None
        raise ConfigurationError(
            f"Bedrock: no {TOKEN_ENV_VAR} is set and SigV4 signing needs botocore: "
            "pip install 'openprogram-sim[aws]', or " + hint
        ) from None
    try:
        credentials = botocore.session.Session().get_credentials()
    except botocore.exceptions.BotoCoreError as exc:
        raise ConfigurationError(
            f"Bedrock: AWS credentials could not be loaded ({exc}); {hint}"
        ) from exc
    if credentials is None and required:
        raise ConfigurationError(f"Bedrock: no AWS credentials found; {hint}")
    return credentials


def sigv4_headers(request: httpx2.Request, credentials: Any, region: str) -> dict[str, str]:
    """The SigV4 headers (Authorization, X-Amz-Date, X-Amz-Security-Token) for ``request``.

    Only content-type and host are signed, so headers added later cannot break the
    signature."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    signed = AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={"content-type": request.headers.get("content-type", "application/json")},
    )
    SigV4Auth(credentials, "bedrock", region).add_auth(signed)
    names = ("Authorization", "X-Amz-Date", "X-Amz-Security-Token")
    return {name: signed.headers[name] for name in names if name in signed.headers}
