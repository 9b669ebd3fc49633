"""A small weather agent: real tools, a toolset, a gated tool and an agentic function."""
