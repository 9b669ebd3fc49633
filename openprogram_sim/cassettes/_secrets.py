"""Secrets kept off disk: scrubbing what a cassette stores, and the final scan before a save.

Scrubbing runs on every interaction as it is recorded (vcrpy's ``before_record_request`` and
``before_record_response`` hooks), and on every live request before it is matched, so the
stored form and the live form compare alike:

* credential headers (:data:`~openprogram_sim.wire.CREDENTIAL_HEADERS`, plus
  ``set-cookie`` and the SigV4 headers) keep their name, and an auth scheme such as
  ``Bearer``, with the value ``<redacted>``;
* key query parameters (:data:`SECRET_QUERY_PARAMS`: Gemini's ``key=``, Azure's
  ``subscription-key=`` and SAS ``sig=``, presigned ``X-Amz-*`` and ``X-Goog-*``...) are
  masked the same way, in the URL and in any URL a header or a body holds;
* bodies lose every key shape (:data:`KEY_SHAPES`) and every known secret value: the
  provider keys and AWS credentials in the environment, and the credentials the request
  itself carried in its headers, in each form they take in text (raw, JSON-escaped with
  and without ``\\/``, URL-encoded, base64 standard and URL-safe, padded or not, alone
  or inside a longer base64 text such as ``user:KEY``).

:func:`find_secrets` is the last look before a save: any key shape or known value left in
any string of the cassette, or a credential header that is not masked, is a finding named
by its place (``interactions[1].request.headers.x-api-key``), and the persister then refuses
to write (:class:`~openprogram_sim.errors.SecretLeakError`).
"""

from __future__ import annotations

import base64
import bisect
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from openprogram_sim.wire import CREDENTIAL_HEADERS, mask_headers, mask_url

__all__ = [
    "KEY_SHAPES",
    "KeyShape",
    "REDACTED",
    "SCRUBBED_HEADERS",
    "SECRET_ENV_VARS",
    "SECRET_QUERY_PARAMS",
    "Scrubber",
    "find_secrets",
    "known_secrets",
    "secret_sources",
]

REDACTED = "<redacted>"

SCRUBBED_HEADERS = CREDENTIAL_HEADERS | {
    "set-cookie",
    "x-amz-date",
    "x-amz-content-sha256",
    "x-goog-api-client-key",
}
"""Headers whose values never reach a cassette (compared lower-case)."""

SECRET_ENV_VARS = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
"""Environment variables whose values are scrubbed wherever they appear."""


@dataclass(frozen=True, slots=True)
class KeyShape:
    """What one kind of key looks like. ``pattern`` starts with a literal where it can (the
    regex engine then skips ahead instead of trying every position); ``check`` looks at the
    text around a match (boundaries, the mix of characters); where the pattern has a group,
    the group is the secret and the rest its context."""

    kind: str
    pattern: re.Pattern[str]
    check: Callable[[str, int, int], bool] = lambda text, start, end: True

    def spans(self, text: str) -> Iterator[tuple[int, int]]:
        for m in self.pattern.finditer(text):
            start, end = m.span(1) if self.pattern.groups else m.span()
            if self.check(text, start, end):
                yield start, end


def _alone(
    before: frozenset[str], after: frozenset[str] = frozenset()
) -> Callable[[str, int, int], bool]:
    """A check that the characters just before and after a match are not in the sets."""

    def check(text: str, start: int, end: int) -> bool:
        if start > 0 and text[start - 1] in before:
            return False
        return not (after and end < len(text) and text[end] in after)

    return check


_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_UPPER_DIGITS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")


def _aws_secret(text: str, start: int, end: int) -> bool:
    """40 characters of base64 standing alone, with upper and lower case, a digit and a
    '/' or '+' (longer base64, hex digests and ids do not qualify)."""
    run = text[start:end]
    return (
        len(run) == 40
        and "=" not in run
        and any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and ("/" in run or "+" in run)
    )


KEY_SHAPES: tuple[KeyShape, ...] = (
    KeyShape("anthropic-key", re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"), _alone(_WORD)),
    KeyShape("openai-key", re.compile(r"sk-(?!ant-)[A-Za-z0-9_-]{20,}"), _alone(_WORD)),
    KeyShape("google-key", re.compile(r"AIza[0-9A-Za-z_-]{35}"), _alone(_WORD)),
    KeyShape(
        "aws-access-key-id",
        re.compile(r"A(?:KIA|SIA)[A-Z0-9]{16}"),
        _alone(_UPPER_DIGITS, _UPPER_DIGITS),
    ),
    KeyShape("aws-secret-key", re.compile(r"[A-Za-z0-9/+=]{40,}"), _aws_secret),
    KeyShape(
        # a secret named as such: "aws_secret_access_key": "...", SecretAccessKey=...
        "aws-secret-key",
        re.compile(
            r"(?i)(?:secret_?access_?key|aws_secret_key)[\"']?\s*[:=]\s*[\"']?"
            r"([A-Za-z0-9/+]{40})"
        ),
    ),
)
"""What a key looks like: OpenAI, Anthropic, Google and AWS keys."""

_PREFIXES = ("sk-", "AIza", "AKIA", "ASIA")
_B64_RUN = b"a" * 40
_B64_TABLE = bytes(
    ord("a") if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "/+=") else ord(" ")
    for c in range(256)
)


def _may_hold_key(text: str) -> bool:
    """False when ``text`` cannot hold any key shape: none of the prefixes, no "secret",
    and no run of 40 base64 characters (found by C-speed substring searches, much faster
    than a regex that tries every position)."""
    if any(prefix in text for prefix in _PREFIXES):
        return True
    if "ecret" in text or "ECRET" in text:
        return True
    raw = text.encode("utf-8", "surrogateescape")
    return _B64_RUN in raw.translate(_B64_TABLE)


_MIN_SECRET = 8  # shorter values would mask ordinary words

SECRET_QUERY_PARAMS = (
    "key",
    "api_key",
    "api-key",
    "apikey",
    "access_token",
    "token",
    "subscription-key",
    "sig",
    "code",
    "client_secret",
    "password",
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Amz-Security-Token",
    "X-Goog-Signature",
    "X-Goog-Credential",
    "Signature",
    "AWSAccessKeyId",
)
"""Query parameters whose values never reach a cassette (compared case-insensitively):
API keys (Gemini's ``key=``, Azure API Management's ``subscription-key=``), tokens, Azure
SAS signatures (``sig=``), Azure Functions keys (``code=``) and presigned S3 and Cloud
Storage URLs."""

_QUERY = re.compile(
    r"([?&](?:" + "|".join(re.escape(p) for p in SECRET_QUERY_PARAMS) + r")=)([^&#\s\"'<>]*)",
    re.IGNORECASE,
)
_URL_START = ("://", "%3A%2F%2F", "%3a%2f%2f")


def _mask_query(text: str) -> str:
    return _QUERY.sub(lambda m: m.group(1) + (m.group(2) and REDACTED), text)


def _open_query(text: str) -> bool:
    """Whether a URL in ``text`` has a credential query parameter not yet masked."""
    if not any(start in text for start in _URL_START) and not text.startswith(("?", "/")):
        return False
    return any(m.group(2) not in ("", REDACTED) for m in _QUERY.finditer(text))


def known_secrets(extra: Iterable[str] = ()) -> set[str]:
    """The secret values to scrub: those of :data:`SECRET_ENV_VARS` that are set, and
    ``extra``; values shorter than 8 characters are left out."""
    values = {os.environ.get(name, "").strip() for name in SECRET_ENV_VARS}
    values.update(v.strip() for v in extra)
    return {v for v in values if len(v) >= _MIN_SECRET}


def secret_sources(text: str) -> list[str]:
    """The variables of :data:`SECRET_ENV_VARS` whose value (in any of its forms) ``text``
    holds: what a cassette names when it scrubbed them, so a replay where one is unset can
    say why a request no longer matches."""
    found = []
    for name in SECRET_ENV_VARS:
        value = os.environ.get(name, "").strip()
        if len(value) >= _MIN_SECRET and any(form in text for form in _forms(value)):
            found.append(name)
    return found


def _forms(secret: str) -> set[str]:
    """Every form ``secret`` takes in text: raw, JSON-escaped (with ``/`` as ``\\/`` too,
    as some encoders write it), URL-encoded and base64 (:func:`_base64_forms`)."""
    escaped = json.dumps(secret)[1:-1]
    return {
        secret,
        escaped,
        escaped.replace("/", "\\/"),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote(secret),
        *_base64_forms(secret),
    }


def _base64_forms(secret: str) -> set[str]:
    """``secret`` in base64, standard and URL-safe, with and without padding; and the part
    of its encoding that does not depend on what surrounds it when it is encoded inside a
    longer text (``user:KEY`` in a Basic credential), at each of the three alignments."""
    raw = secret.encode("utf-8")
    out: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        out |= {whole, whole.rstrip("=")}
        for shift in (0, 1, 2):
            text = encode(b"\0" * shift + raw).decode("ascii")
            # characters whose 6 bits all come from the secret's bytes
            first, end = -(-8 * shift // 6), (8 * shift + 8 * len(raw)) // 6
            out.add(text[first:end])
    return out


def _credential(name: str, value: str) -> str:
    """The secret part of a credential header's value (its scheme dropped)."""
    _, sep, rest = value.partition(" ")
    if sep and name.lower().endswith("authorization"):
        return rest.strip()
    return value.strip()


class Scrubber:
    """Scrubs headers, URLs and body text (see the module docstring). ``secrets`` are the
    exact values to mask besides the key shapes; :meth:`learn` adds the credentials a
    request carries."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._seen: set[str] = set()
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        new = {form for s in secrets if len(s.strip()) >= _MIN_SECRET for form in _forms(s.strip())}
        if new - self._values:
            self._values |= new
            # longest first, so a value is masked whole before a part of it could be
            ordered = sorted(self._values, key=len, reverse=True)
            self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    @property
    def secrets(self) -> set[str]:
        """The exact values masked (each in every form it takes in text)."""
        return set(self._values)

    def learn(self, headers: Mapping[str, Any]) -> None:
        """Remember the credentials in ``headers`` (e.g. a key passed as ``api_key=``, which
        no environment variable holds) so bodies that echo them are scrubbed too."""
        found = []
        for name, value in headers.items():
            if name.lower() in SCRUBBED_HEADERS:
                for v in value if isinstance(value, list) else [value]:
                    if v not in self._seen:  # every request of a session carries the same
                        self._seen.add(v)
                        found.append(_credential(name, str(v)))
        if found:
            self.add(found)

    def text(self, text: str) -> str:
        """``text`` with every known secret and key shape masked, and the credential query
        parameters of any URL in it."""
        if any(start in text for start in _URL_START):
            text = _mask_query(text)
        for start, end, kind in reversed(self.spans(text)):
            mask = REDACTED if kind == "secret" else f"<redacted:{kind}>"
            text = text[:start] + mask + text[end:]
        return text

    def holds_secret(self, text: str, _depth: int = 0) -> bool:
        """Whether ``text`` holds a known value or a key shape, also once its JSON escapes
        are read (see :meth:`spans`)."""
        if any(value in text for value in self._values):
            return True
        if _open_query(text):
            return True
        if _may_hold_key(text) and any(
            next(shape.spans(text), None) is not None for shape in KEY_SHAPES
        ):
            return True
        if _depth < _ESCAPE_DEPTH and _escaped(text):
            return self.holds_secret(JsonView(text).text, _depth + 1)
        return False

    def spans(self, text: str, _depth: int = 0) -> list[tuple[int, int, str]]:
        """Where ``text`` holds a secret: ``(start, end, kind)``, in order, not overlapping
        (``kind`` is ``secret`` for a known value). Text with JSON escapes that can hide a
        key's characters (``\\u0073k-...``, ``\\/``) is also read as JSON text, twice over
        at most (a tool call's arguments are JSON text inside JSON), and what it holds is
        mapped back onto ``text``."""
        found: list[tuple[int, int, str]] = []
        if self._pattern is not None and any(value in text for value in self._values):
            found += [(m.start(), m.end(), "secret") for m in self._pattern.finditer(text)]
        if _may_hold_key(text):
            for shape in KEY_SHAPES:
                found += [(start, end, shape.kind) for start, end in shape.spans(text)]
        if _depth < _ESCAPE_DEPTH and _escaped(text):
            view = JsonView(text)
            found += [
                (view.start(start), view.end(end), kind)
                for start, end, kind in self.spans(view.text, _depth + 1)
            ]
        if not found:
            return found
        out: list[tuple[int, int, str]] = []
        for start, end, kind in sorted(found):
            if out and start < out[-1][1]:  # overlapping: one span covering both
                out[-1] = (out[-1][0], max(end, out[-1][1]), out[-1][2])
            else:
                out.append((start, end, kind))
        return out

    def value(self, value: Any) -> Any:
        """A parsed JSON value with every string scrubbed (keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        return value

    def headers(self, headers: Mapping[str, Any]) -> dict[str, Any]:
        """``headers`` (each value a string or a list of them) with credential values
        masked and every other value scrubbed as text."""
        out: dict[str, Any] = {}
        for name, value in headers.items():
            values = value if isinstance(value, list) else [value]
            masked = [self._header(name, str(v)) for v in values]
            out[name] = masked if isinstance(value, list) else masked[0]
        return out

    def _header(self, name: str, value: str) -> str:
        if name.lower() in SCRUBBED_HEADERS:
            if name.lower() in CREDENTIAL_HEADERS:
                return mask_headers({name: value})[name]
            return REDACTED
        return self.text(value)

    def url(self, url: str) -> str:
        """``url`` with its credential query parameters masked, then scrubbed as text."""
        return self.text(_mask_query(mask_url(url)))


_ESCAPE_DEPTH = 2
_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _escaped(text: str) -> bool:
    """Whether ``text`` has a JSON escape that can stand for a key's character."""
    return "\\u" in text or "\\/" in text


class JsonView:
    """``text`` with its JSON string escapes read (``text``), and the way back: the offset
    in the original of each offset in the view."""

    def __init__(self, original: str) -> None:
        parts: list[str] = []
        self._marks: list[int] = []  # view offsets where a segment starts
        self._segments: list[tuple[int, int]] = []  # (original offset, width; 0: literal)
        pos = view = 0
        for m in _ESCAPE.finditer(original):
            if m.start() > pos:
                self._add(view, pos, 0)
                parts.append(original[pos : m.start()])
                view += m.start() - pos
            token = m.group()
            char = chr(int(token[2:], 16)) if token[1] == "u" else _SIMPLE[token[1]]
            if "\ud800" <= char <= "\udfff":
                char = "\ufffd"  # half of a surrogate pair: never part of a key
            self._add(view, m.start(), len(token))
            parts.append(char)
            view += 1
            pos = m.end()
        if pos < len(original):
            self._add(view, pos, 0)
            parts.append(original[pos:])
        self.text = "".join(parts)
        self._length = len(original)

    def _add(self, view: int, original: int, width: int) -> None:
        self._marks.append(view)
        self._segments.append((original, width))

    def start(self, offset: int) -> int:
        """Where the character at view ``offset`` starts in the original."""
        if offset >= len(self.text):
            return self._length
        i = bisect.bisect_right(self._marks, offset) - 1
        original, width = self._segments[i]
        return original if width else original + offset - self._marks[i]

    def end(self, offset: int) -> int:
        """Where the character before view ``offset`` ends in the original."""
        if offset <= 0:
            return 0
        i = bisect.bisect_right(self._marks, offset - 1) - 1
        original, width = self._segments[i]
        return original + width if width else original + offset - self._marks[i]


def _is_masked(value: str) -> bool:
    return value == REDACTED or value.endswith(" " + REDACTED)


def find_secrets(data: Any, secrets: Iterable[str] = ()) -> list[tuple[str, str]]:
    """Every place in ``data`` (the cassette as it will be written) that still holds a
    secret: ``(place, kind)``, e.g. ``("interactions[0].request.headers.x-api-key",
    "credential header")``. ``secrets`` are exact values to look for besides the key
    shapes."""
    scrubber = Scrubber(secrets)
    findings: list[tuple[str, str]] = []
    for place, key, value in _strings(data, ""):
        if key is not None and key.lower() in SCRUBBED_HEADERS and ".headers." in place:
            if not _is_masked(value):
                findings.append((place, "credential header"))
            continue
        kind = _kind_of(value, scrubber)
        if kind is not None:
            findings.append((place, kind))
    return findings


def _kind_of(text: str, scrubber: Scrubber, depth: int = 0) -> str | None:
    if scrubber._pattern is not None and scrubber._pattern.search(text):
        return "a known secret value (from the environment or the request's credentials)"
    if _open_query(text):
        return "a credential query parameter"
    for shape in KEY_SHAPES:
        if next(shape.spans(text), None) is not None:
            return shape.kind
    if depth < _ESCAPE_DEPTH and _escaped(text):
        return _kind_of(JsonView(text).text, scrubber, depth + 1)
    return None


def _strings(
    node: Any, place: str, key: str | None = None
) -> Iterator[tuple[str, str | None, str]]:
    """``(place, header name or None, text)`` for every string (and bytes) in ``node``."""
    if isinstance(node, str):
        yield place, key, node
    elif isinstance(node, (bytes, bytearray)):
        yield place, key, bytes(node).decode("latin-1")
    elif isinstance(node, dict):
        for k, v in node.items():
            sub = f"{place}.{k}" if place else str(k)
            yield f"{sub} (the key)", None, str(k)
            yield from _strings(v, sub, str(k))
    elif isinstance(node, (list, tuple)):
        for i, v in enumerate(node):
            yield from _strings(v, f"{place}[{i}]", key)
