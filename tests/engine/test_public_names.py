"""The public names of the engine are pinned: an accidental export, or a lost one, fails here.

As httpx's own test does: every name in ``__all__`` is importable, and every public name a
package holds (or a module defines) that is not in ``__all__`` fails. Public classes report
the public module they are imported from, not the private one that defines them.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from types import ModuleType

import pytest

PUBLIC: dict[str, list[str]] = {
    "openprogram": [
        "Agent", "AgentBusyError", "AgentState", "AgenticRecursionError",
        "ArgumentTypeError", "AssistantMessage", "ConfigurationError", "DecisionError",
        "ExecResult", "FunctionTool", "ImageContent", "InvalidArgumentError", "LoopResult",
        "ModelError", "NestingDepthError", "NoRuntimeError", "OpenProgramError", "Provider",
        "ProviderNotFoundError",
        "RunAbortedError", "RunError", "RunOptions", "Runtime", "TextContent", "ThinkingContent",
        "Tool",
        "ToolCall", "ToolDefinitionError", "ToolEntryError", "ToolRegistry", "ToolResult",
        "ToolResultMessage", "ToolSchemaError", "ToolSpec", "UnknownToolsetError", "Usage",
        "UsageError", "UserMessage", "__version__", "agentic_function", "as_tool",
        "current_depth", "current_runtime", "default_registry", "function", "get_provider",
        "register_provider", "validate_tool_arguments",
    ],
    "openprogram.agent": [
        "ABORTED_TEXT", "MAX_INNER_ITERATIONS", "SKIPPED_TEXT", "AbortSignal", "Agent",
        "AgentContext", "AgentState", "Listener", "LoopConfig", "LoopResult", "effective_cap",
        "run_agent_loop", "stream_agent_loop",
    ],
    "openprogram.providers": [
        "Context", "MessageBuilder", "Provider", "ProviderFactory", "RunOptions", "RunSettings",
        "StreamOptions", "ToolChoice",
        "check_tool_choice", "get_provider", "parse_arguments", "parse_response",
        "provider_names", "register_provider", "tool_choice_fields",
    ],
    "openprogram.providers.eventstream": [
        "EventStreamDecoder", "EventStreamError", "EventStreamMessage", "encode_message",
    ],
    "openprogram.tools": [
        "LAYERS", "SEARCH_TOOL_NAME", "AgenticOptions", "ArgumentValidator", "ArgumentsError",
        "Dropped", "FunctionTool", "Selection", "Tool", "ToolGates", "ToolOptions", "ToolPolicy",
        "ToolRegistry", "ToolResult", "ToolSpec", "UpdateCallback", "agentic_function",
        "as_tool", "compile_validator", "current_runtime", "default_registry", "function",
        "normalize_result", "validate_tool_arguments",
    ],
    "openprogram.tools.hooks": [
        "Deferral", "Menu", "PickError", "current_loaded_var", "current_runtime_var",
    ],
    "openprogram.tools.registry": [
        "BUILTIN_TOOLSETS", "RegistrySnapshot", "ToolRegistry", "default_registry",
    ],
    "openprogram.types": [
        "AnyMessage", "AssistantContent", "AssistantMessage", "ContentBlock", "ErrorDetails",
        "ErrorReason", "ImageContent", "Message", "StopReason", "TextContent",
        "ThinkingContent", "ToolCall", "ToolResultContent", "ToolResultMessage", "ToolSpec",
        "Usage", "UserContent", "UserMessage", "message_from_dict", "message_from_json",
        "message_to_dict", "message_to_json", "messages_from_json", "messages_to_json",
        "now_ms",
    ],
    "openprogram.events": [
        "AgentEnd", "AgentEvent", "AgentEventBase", "AgentStart", "EndReason", "EventStream",
        "MessageEnd",
        "MessageOrigin", "MessageStart", "MessageUpdate", "ProviderDone", "ProviderError",
        "ProviderEvent", "ProviderStart", "TextDelta", "TextEnd", "TextStart", "ThinkingDelta",
        "ThinkingEnd", "ThinkingStart", "ToolCallDelta", "ToolCallEnd", "ToolCallStart",
        "ToolErrorKind", "ToolExecutionEnd", "ToolExecutionStart", "ToolExecutionUpdate",
        "TurnEnd", "TurnStart",
    ],
    "openprogram.errors": [
        "AgentBusyError", "AgenticRecursionError", "ArgumentTypeError", "ConfigurationError",
        "DecisionError", "InvalidArgumentError", "ModelError", "NestingDepthError",
        "NoRuntimeError",
        "OpenProgramError", "ProviderNotFoundError", "RunAbortedError", "RunError",
        "ToolDefinitionError", "ToolEntryError", "ToolSchemaError", "UnknownToolsetError",
        "UsageError",
    ],
}  # fmt: skip

MODULES = list(PUBLIC)


def _public_names(module: ModuleType) -> set[str]:
    """What a package holds (everything it imports is a re-export, except its submodules),
    or what a plain module defines (its own imports are not exports). Names that are no
    identifiers are left out: pytest's assertion rewriting puts ``@py_builtins`` in a
    package it rewrote (run alone, this file's session rewrites ``openprogram``, which ships
    in the distribution of an entry-point plugin)."""
    if hasattr(module, "__path__"):
        return {
            name
            for name, value in vars(module).items()
            if name.isidentifier()
            and not name.startswith("_")
            and not (
                isinstance(value, ModuleType) and value.__name__.startswith(f"{module.__name__}.")
            )
        }
    names: set[str] = set()
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("name", MODULES)
def test_all_is_the_pinned_list(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == sorted(PUBLIC[name]), "update PUBLIC on purpose"
    assert len(set(module.__all__)) == len(module.__all__), "a name is listed twice"


@pytest.mark.parametrize("name", MODULES)
def test_every_listed_name_is_importable(name: str) -> None:
    module = importlib.import_module(name)
    namespace: dict[str, object] = {}
    exec(f"from {name} import *", namespace)
    for attribute in module.__all__:
        assert namespace[attribute] is getattr(module, attribute), attribute


@pytest.mark.parametrize("name", MODULES)
def test_no_public_name_outside_all(name: str) -> None:
    module = importlib.import_module(name)
    unlisted = _public_names(module) - {"__version__"} - set(module.__all__)
    assert not unlisted, f"public in {name} but not in __all__ (export or rename with _)"


@pytest.mark.parametrize("name", MODULES)
def test_public_classes_report_a_public_module(name: str) -> None:
    module = importlib.import_module(name)
    for attribute in module.__all__:
        value = getattr(module, attribute)
        if not isinstance(value, type):
            continue
        home = value.__module__
        assert not any(part.startswith("_") for part in home.split(".")), (
            f"{name}.{attribute} reports the private module {home}"
        )
        assert getattr(importlib.import_module(home), attribute) is value
        assert repr(value) == f"<class '{home}.{value.__qualname__}'>"


def test_classes_from_private_modules_report_the_package() -> None:
    import openprogram

    assert openprogram.FunctionTool.__module__ == "openprogram.tools"
    assert openprogram.ToolSpec.__module__ == "openprogram.types"
    assert repr(openprogram.tools.ArgumentsError) == "<class 'openprogram.tools.ArgumentsError'>"
