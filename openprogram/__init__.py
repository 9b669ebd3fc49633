"""openprogram: a tool-call loop engine for LLM agents.

Each round the model returns one assistant message; tool calls in it are executed and
their results fed back; a text-only message finishes the run. See ``Runtime.exec``.
"""

from openprogram.agent import Agent, AgentState, LoopResult
from openprogram.errors import (
    AgentBusyError,
    AgenticRecursionError,
    ArgumentTypeError,
    ConfigurationError,
    DecisionError,
    InvalidArgumentError,
    ModelError,
    NestingDepthError,
    NoRuntimeError,
    OpenProgramError,
    ProviderNotFoundError,
    RunAbortedError,
    RunError,
    ToolDefinitionError,
    ToolEntryError,
    ToolSchemaError,
    UnknownToolsetError,
    UsageError,
)
from openprogram.providers import Provider, RunOptions, get_provider, register_provider
from openprogram.runtime import ExecResult, Runtime, current_depth
from openprogram.tools import (
    FunctionTool,
    Tool,
    ToolResult,
    ToolSpec,
    agentic_function,
    as_tool,
    current_runtime,
    function,
    validate_tool_arguments,
)
from openprogram.tools.registry import ToolRegistry, default_registry
from openprogram.types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__version__ = "0.1.0"
# The distribution that ships this engine. The index's "openprogram" is another project that
# also provides `import openprogram`: openprogram_sim reads this line from the file (without
# importing the engine) to tell which of the two Python finds.
__distribution__ = "openprogram-sim"

__all__ = [
    "Agent",
    "AgentBusyError",
    "AgentState",
    "AgenticRecursionError",
    "ArgumentTypeError",
    "AssistantMessage",
    "ConfigurationError",
    "DecisionError",
    "ExecResult",
    "FunctionTool",
    "ImageContent",
    "InvalidArgumentError",
    "LoopResult",
    "ModelError",
    "NestingDepthError",
    "NoRuntimeError",
    "OpenProgramError",
    "Provider",
    "ProviderNotFoundError",
    "RunAbortedError",
    "RunError",
    "RunOptions",
    "Runtime",
    "TextContent",
    "ThinkingContent",
    "Tool",
    "ToolCall",
    "ToolDefinitionError",
    "ToolEntryError",
    "ToolRegistry",
    "ToolResult",
    "ToolResultMessage",
    "ToolSchemaError",
    "ToolSpec",
    "UnknownToolsetError",
    "Usage",
    "UsageError",
    "UserMessage",
    "__version__",
    "agentic_function",
    "as_tool",
    "current_depth",
    "current_runtime",
    "default_registry",
    "function",
    "get_provider",
    "register_provider",
    "validate_tool_arguments",
]
