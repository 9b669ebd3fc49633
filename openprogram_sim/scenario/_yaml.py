"""Reading a scenario file's YAML once, safely, with a line map.

One parse: libyaml composes the node tree (``CSafeLoader``, the pure-Python loader where
libyaml is missing), and the data is built from those nodes, so every line number comes
from the same parse as the data. Scenario files are treated as hostile input:

- **size**: a file over :data:`MAX_BYTES` is refused before it is read, naming its size;
- **encoding**: only UTF-8 text (a UTF-8 byte-order mark is allowed);
- **aliases**: a document whose aliases expand to more than :data:`MAX_VALUES` values
  (the "billion laughs" bomb), or that refers to itself, is refused without expanding it;
- **nesting**: deeper than :data:`MAX_DEPTH` levels is refused (no ``RecursionError``);
- **duplicate keys** are mistakes naming both lines (YAML loaders keep the last silently);
- **tabs** in indentation, which YAML forbids, are named as such (libyaml says only "found
  character that cannot start any token"); an **empty** document is told apart from a null.

The line map records the line of every key and value by key path while the data is built
from the nodes (the same parse); the node tree is then let go. Aliases are measured first,
so the paths recorded are bounded by :data:`MAX_VALUES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = [
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_VALUES",
    "LineMap",
    "YamlDocument",
    "YamlProblem",
    "decode",
    "read_yaml",
    "too_large",
]

MAX_BYTES = 10 * 1024 * 1024
"""The largest scenario file read (10 MiB; the library's files are a few KiB)."""

MAX_VALUES = 100_000
"""The most values a document may hold once its aliases are expanded."""

MAX_DEPTH = 64
"""The deepest nesting of mappings and lists (a scenario needs about ten)."""

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_STR = "tag:yaml.org,2002:str"
_MERGE = "tag:yaml.org,2002:merge"
_NULL = "tag:yaml.org,2002:null"


class YamlProblem(Exception):
    """The text is not a document we will build (syntax, encoding, a limit)."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass(slots=True)
class YamlDocument:
    data: Any
    lines: LineMap
    duplicates: list[tuple[tuple[Any, ...], int, int]] = field(default_factory=list)
    """``(key path, first line, repeated line)`` for every key given twice."""
    empty: bool = False
    """The text holds no document: only blank lines and comments (``data`` is None)."""


def too_large(size: int | None) -> YamlProblem:
    """The error for a file of ``size`` bytes (None: more than :data:`MAX_BYTES` were read,
    the real size unknown) over :data:`MAX_BYTES`."""
    cap = _mib(MAX_BYTES)
    if size is None:
        what = f"over {cap}"
    elif _mib(size) == _mib(MAX_BYTES + 1):  # rounds to the cap: "10.0 MiB" would read as under
        what = f"just over {cap} ({size:,} bytes)"
    else:
        what = f"{_mib(size)} ({size:,} bytes)"
    return YamlProblem(
        None,
        f"the file is {what}; scenario files are limited to {cap}, a fixed limit (a scenario "
        "is a few KiB): split it into several scenarios, or keep large data out of it (a "
        "recorded session belongs in a cassette: `model: {cassette: ...}`)",
    )


def _mib(size: int) -> str:
    mib = size / 2**20
    return f"{mib:.0f} MiB" if mib == int(mib) else f"{mib:.1f} MiB"


def decode(raw: bytes) -> str:
    """``raw`` as UTF-8 text, or a :class:`YamlProblem` saying what the bytes are instead."""
    if len(raw) > MAX_BYTES:
        raise too_large(None)
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise YamlProblem(
            1, "the file is UTF-16 (it starts with a byte-order mark); save it as UTF-8"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise YamlProblem(
            line,
            f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8",
        ) from None


def _compose(text: str) -> yaml.Node | None:
    loader = _FastLoader(text)
    try:
        return loader.get_single_node()  # type: ignore[no-any-return]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        tabbed = _tab_indented(text, line)
        if tabbed is not None:
            raise YamlProblem(tabbed[0], _tab_message(*tabbed)) from None
        raise YamlProblem(line, f"not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise YamlProblem(None, f"not valid YAML: {exc}") from None
    except RecursionError:
        raise YamlProblem(None, f"nested too deeply (the limit is {MAX_DEPTH} levels)") from None
    finally:
        loader.dispose()


def _tab_indented(text: str, error_line: int | None) -> tuple[int, int] | None:
    """``(line, count)`` when a syntax error is explained by tabs in indentation: the error's
    line when a tab indents it, else the first tab-indented line before it; ``count`` is how
    many lines of the file a tab indents."""
    tabbed = [n for n, line in enumerate(text.splitlines(), 1) if "\t" in _indent(line)]
    if not tabbed:
        return None
    if error_line is not None and error_line in tabbed:
        return error_line, len(tabbed)
    before = [n for n in tabbed if error_line is None or n <= error_line]
    return (before[0], len(tabbed)) if before else None


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _tab_message(line: int, count: int) -> str:
    others = f", and so are {count - 1} other line{'s' if count > 2 else ''}" if count > 1 else ""
    return (
        f"line {line} is indented with a tab{others}; YAML allows only spaces for indentation: "
        f"replace the tab{'s' if count > 1 else ''} with spaces (editors: 'convert "
        "indentation to spaces')"
    )


def _children(node: yaml.Node) -> Iterator[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield key
            yield value
    elif isinstance(node, yaml.SequenceNode):
        yield from node.value


def _flatten_merges(root: yaml.Node) -> None:
    """Apply ``<<`` merge keys (as YAML's safe loader does) before measuring."""
    seen: set[int] = set()
    stack = [root]
    flattener = yaml.constructor.SafeConstructor()  # the safe loader's own, without its parser
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode) and any(k.tag == _MERGE for k, _ in node.value):
            try:
                flattener.flatten_mapping(node)
            except yaml.MarkedYAMLError as exc:
                mark = exc.problem_mark
                raise YamlProblem(mark.line + 1 if mark else None, str(exc.problem)) from None
        stack.extend(_children(node))


def _measure(root: yaml.Node) -> None:
    """Refuse documents that expand past :data:`MAX_VALUES` values, nest deeper than
    :data:`MAX_DEPTH`, or contain themselves; linear in the number of distinct nodes."""
    size: dict[int, int] = {}
    height: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            kids = list(_children(node))
            size[key] = 1 + sum(size[id(k)] for k in kids)
            height[key] = 1 + max((height[id(k)] for k in kids), default=0)
            open_nodes.discard(key)
            _check_limits(node, size[key], height[key])
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise YamlProblem(
                node.start_mark.line + 1, "an alias refers to the mapping or list it is inside"
            )
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in _children(node) if id(k) not in size)


def _check_limits(node: yaml.Node, size: int, height: int) -> None:
    line = node.start_mark.line + 1
    if size > MAX_VALUES:
        raise YamlProblem(
            line,
            f"its aliases expand to more than {MAX_VALUES:,} values; scenario files "
            "do not need that many (an alias bomb?): write the values out, or use fewer aliases",
        )
    if height > MAX_DEPTH:
        raise YamlProblem(
            line, f"nested more than {MAX_DEPTH} levels deep; scenario files need far fewer"
        )


class _Builder:
    """Python data from a measured node tree (aliases expanded: the data is a tree), with
    the line of every key and value by key path, so the node tree can be let go."""

    def __init__(self) -> None:
        # the safe loader's constructor alone: a whole SafeLoader holds its parser's state
        # as a bound method of itself, a cycle that kept every file's nodes and marks alive
        # until the next garbage collection (some forty objects a file)
        self.constructor = yaml.constructor.SafeConstructor()
        self.duplicates: list[tuple[tuple[Any, ...], int, int]] = []
        self.path: list[Any] = []
        """The key path of the node being built."""
        self.keys: dict[tuple[Any, ...], int] = {}
        self.values: dict[tuple[Any, ...], int] = {(): 1}

    def build(self, node: yaml.Node) -> Any:
        if type(node) is yaml.ScalarNode:
            return node.value if node.tag == _STR else self.constructor.construct_object(node)
        path = self.path
        if len(path) >= MAX_DEPTH:  # measured already when aliases are present; cheap here
            _check_limits(node, 1, MAX_DEPTH + 1)
        if type(node) is yaml.SequenceNode:
            items = []
            values = self.values
            for i, item in enumerate(node.value):
                path.append(i)
                values[tuple(path)] = item.start_mark.line + 1
                items.append(self.build(item))
                path.pop()
            return items
        return self._mapping(node)

    def _mapping(self, node: yaml.Node) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        path = self.path
        keys, values = self.keys, self.values
        for key_node, value_node in node.value:
            key = self.build(key_node)
            if isinstance(key, (dict, list)):
                raise YamlProblem(key_node.start_mark.line + 1, "a mapping or list cannot be a key")
            line = key_node.start_mark.line + 1
            if key in out:
                first = next(k for k, _ in node.value if self.build(k) == key)
                self.duplicates.append(((*path, key), first.start_mark.line + 1, line))
            path.append(key)
            where = tuple(path)
            keys[where] = line
            values[where] = value_node.start_mark.line + 1
            out[key] = self.build(value_node)
            path.pop()
        return out


_TAGS: dict[tuple[str, tuple[bool, bool]], str] = {}
"""Implicit tags already resolved, by (value, implicit): scenario files repeat scalars."""


class _FastLoader(_Loader):  # type: ignore[misc]
    """The libyaml loader with a memo in front of the (pure-Python) tag resolver."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and len(value) < 64 and len(_TAGS) < 4096:
            key = (value, implicit)
            tag = _TAGS.get(key)
            if tag is None:
                tag = _TAGS[key] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)


def read_yaml(text: str) -> YamlDocument:
    """Parse ``text`` once: the data, its line map and the keys given twice."""
    root = _compose(text)
    if root is None or (type(root) is yaml.ScalarNode and root.tag == _NULL and not root.value):
        return YamlDocument(None, LineMap({}, {}), empty=True)  # nothing, or a bare `---`
    if "&" in text:  # anchors: aliases and merge keys are possible (none without an anchor)
        _flatten_merges(root)
        _measure(root)
    builder = _Builder()
    builder.values[()] = root.start_mark.line + 1
    data = builder.build(root)
    return YamlDocument(data, LineMap(builder.keys, builder.values), builder.duplicates)


class LineMap:
    """Line numbers of keys and values by key path, recorded while the data was built (from
    the same parse); a path that does not exist falls back to its nearest existing prefix."""

    __slots__ = ("keys", "values")

    def __init__(self, keys: dict[tuple[Any, ...], int], values: dict[tuple[Any, ...], int]):
        self.keys = keys
        self.values = values

    def line(self, path: tuple[Any, ...], *, key: bool = True) -> int | None:
        """The line of the key at ``path`` (or of its value, for list items and when
        ``key=False``), else of the nearest enclosing node."""
        if not self.values:
            return None
        while path:
            for where in (path, _as_text(path)):
                first, second = (self.keys, self.values) if key else (self.values, self.keys)
                found = first.get(where) or second.get(where)
                if found is not None:
                    return found
            path = path[:-1]
        return self.values.get(())


def _as_text(path: tuple[Any, ...]) -> tuple[Any, ...]:
    """``path`` with mapping keys as YAML wrote them (a key ``1:`` or ``true:`` is the text
    a validation error quotes)."""
    return tuple(p if isinstance(p, int) and not isinstance(p, bool) else str(p) for p in path)
