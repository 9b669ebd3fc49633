"""Tools: what the model may pick, and how a Python function becomes one.

- :func:`function` / :func:`agentic_function`: decorators building a tool's spec from a
  function's signature and docstring (checked when applied).
- :class:`ToolRegistry` / :data:`default_registry`: tools by name, toolset presets, and
  the gating layers (:data:`LAYERS`) that decide what a call offers.
- :func:`validate_tool_arguments`: JSON Schema validation with lenient coercion.
- :func:`as_tool`: adapts any ``tools=`` entry to the loop's :class:`Tool`.
"""

from openprogram.tools._context import current_runtime
from openprogram.tools._decorators import (
    AgenticOptions,
    FunctionTool,
    ToolOptions,
    agentic_function,
    function,
)
from openprogram.tools._deferred import SEARCH_TOOL_NAME
from openprogram.tools._gating import LAYERS, Dropped, Selection, ToolGates, ToolPolicy
from openprogram.tools._tool import Tool, ToolResult, UpdateCallback, as_tool, normalize_result
from openprogram.tools._validation import (
    ArgumentsError,
    ArgumentValidator,
    compile_validator,
    validate_tool_arguments,
)
from openprogram.tools.registry import ToolRegistry, default_registry
from openprogram.types import ToolSpec

__all__ = [
    "LAYERS",
    "SEARCH_TOOL_NAME",
    "AgenticOptions",
    "ArgumentValidator",
    "ArgumentsError",
    "Dropped",
    "FunctionTool",
    "Selection",
    "Tool",
    "ToolGates",
    "ToolOptions",
    "ToolPolicy",
    "ToolRegistry",
    "ToolResult",
    "ToolSpec",
    "UpdateCallback",
    "agentic_function",
    "as_tool",
    "compile_validator",
    "current_runtime",
    "default_registry",
    "function",
    "normalize_result",
    "validate_tool_arguments",
]

# Classes report this module, not the private one they are defined in (repr, pickling, docs).
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) and _value.__module__.startswith(f"{__name__}._"):
        _value.__module__ = __name__
del _name, _value
