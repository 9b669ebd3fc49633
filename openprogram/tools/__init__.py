"""Tools: specs, argument validation, and adapting user entries for the loop."""

from openprogram.tools._tool import (
    Tool,
    ToolResult,
    ToolSpec,
    UpdateCallback,
    as_tool,
    normalize_result,
)
from openprogram.tools._validation import (
    ArgumentsError,
    ArgumentValidator,
    compile_validator,
    validate_tool_arguments,
)

__all__ = [
    "ArgumentValidator",
    "ArgumentsError",
    "Tool",
    "ToolResult",
    "ToolSpec",
    "UpdateCallback",
    "as_tool",
    "compile_validator",
    "normalize_result",
    "validate_tool_arguments",
]
