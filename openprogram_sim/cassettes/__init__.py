"""Cassettes: real provider HTTP sessions recorded once and replayed offline (not built yet).

This package will hold the recorder (vcrpy over httpx2), the secret scrubber, request
matching with JSON-path diffs, replay through the real adapters, and ``distill`` (a
cassette turned into an editable scenario). Until then, ``model: {cassette: ...}`` in a
scenario file is refused at load with a message saying so.
"""

__all__: list[str] = []
