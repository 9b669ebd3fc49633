"""A small agent on the ``google-genai`` SDK (``generate_content``, not streamed, automatic
function calling off) that keeps every rule the fuzzer checks (``genai_loop:agent``): it waits
out a 429 (at least the longest ``retry-after`` the fuzzer asks for), retries other failures,
and answers every call, matched by name (Gemini sends no call ids)."""

from __future__ import annotations

import time
from typing import Any

from google import genai
from google.genai import errors, types

SEARCH = types.FunctionDeclaration(
    name="search",
    description="Search the web.",
    parameters_json_schema={
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"],
    },
)
CONFIG = types.GenerateContentConfig(
    tools=[types.Tool(function_declarations=[SEARCH])],
    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
)


def _reply(client: genai.Client, contents: list[Any]) -> Any:
    for _ in range(5):
        try:
            return client.models.generate_content(
                model="gemini-2.5-flash", contents=contents, config=CONFIG
            )
        except errors.APIError as exc:
            time.sleep(0.25 if exc.code == 429 else 0.01)
        except Exception:  # a cut connection, as the HTTP library raises it
            time.sleep(0.01)
    raise RuntimeError("no reply after 5 attempts")


def agent(endpoints: Any) -> str:
    options = types.HttpOptions(
        base_url=endpoints.gemini, retry_options=types.HttpRetryOptions(attempts=1)
    )
    with genai.Client(api_key=endpoints.api_key, http_options=options) as client:
        return _loop(client)


def _loop(client: genai.Client) -> str:
    contents: list[Any] = [types.Content(role="user", parts=[types.Part(text="Find the tides.")])]
    for _ in range(12):
        reply = _reply(client, contents)
        content = reply.candidates[0].content
        calls = [p.function_call for p in content.parts or [] if p.function_call]
        if not calls:
            return reply.text or ""
        contents.append(content)
        results = [
            types.Part.from_function_response(name=c.name, response={"output": "3 results"})
            for c in calls
        ]
        contents.append(types.Content(role="user", parts=results))
    raise RuntimeError("no answer after 12 rounds")
