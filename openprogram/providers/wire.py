"""Deprecated: renamed :mod:`openprogram.providers.apis` (the harness has its own ``wire``).

Kept for one release. Import ``parse_response`` and ``tool_choice_fields`` from
:mod:`openprogram.providers` instead.
"""

import warnings

from openprogram.providers.apis import APIS, parse_response, tool_choice_fields

__all__ = ["APIS", "parse_response", "tool_choice_fields"]

warnings.warn(
    "openprogram.providers.wire is deprecated and will be removed in the next release; "
    "import parse_response and tool_choice_fields from openprogram.providers "
    "(the module is now openprogram.providers.apis)",
    DeprecationWarning,
    stacklevel=2,
)
