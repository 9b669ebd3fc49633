"""Tools that raise what ``except Exception`` does not catch, for the scenarios beside this
module (``python: "raising_tools:NAME"``; a scenario's folder is an import root)."""

from __future__ import annotations

import asyncio

from openprogram import ToolRegistry, function

registry = ToolRegistry()  # its own: the default registry stays as it was


class ToolBoom(BaseException):
    """A BaseException that is not an Exception (as pytest's ``Failed`` and trio's
    ``Cancelled`` are): it is meant to get past ``except Exception``."""


@function(registry=registry)
async def lookup(city: str) -> str:
    """Look up the weather; awaits a request that someone else cancelled."""
    request = asyncio.ensure_future(asyncio.sleep(3600))
    request.cancel()
    await request  # raises CancelledError here, though this task was never cancelled
    return "unreachable"


@function(registry=registry)
def convert(amount: float) -> str:
    """Convert a price; a sync tool raising CancelledError itself."""
    raise asyncio.CancelledError("rate feed closed")


@function(registry=registry)
def explode() -> str:
    """Raise a BaseException that is not an Exception."""
    raise ToolBoom("the tool went past except Exception")
