"""The public names of the tool layer are pinned: an accidental export or a lost one fails."""

from __future__ import annotations

import openprogram
import openprogram.tools
import openprogram.tools.registry


def test_tools_public_names() -> None:
    assert sorted(openprogram.tools.__all__) == sorted(
        [
            "LAYERS",
            "SEARCH_TOOL_NAME",
            "ArgumentValidator",
            "ArgumentsError",
            "Dropped",
            "FunctionTool",
            "Selection",
            "Tool",
            "ToolGates",
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
    )
    for name in openprogram.tools.__all__:
        assert hasattr(openprogram.tools, name), name


def test_registry_module_and_top_level_exports() -> None:
    assert sorted(openprogram.tools.registry.__all__) == [
        "BUILTIN_TOOLSETS",
        "RegistrySnapshot",
        "ToolRegistry",
        "default_registry",
    ]
    for name in (
        "function",
        "agentic_function",
        "FunctionTool",
        "DecisionError",
        "ToolDefinitionError",
        "UnknownToolsetError",
        "current_runtime",
    ):
        assert name in openprogram.__all__ and hasattr(openprogram, name), name
    assert issubclass(openprogram.DecisionError, openprogram.OpenProgramError)
    assert issubclass(openprogram.ToolDefinitionError, openprogram.OpenProgramError)
