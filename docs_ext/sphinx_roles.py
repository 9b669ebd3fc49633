"""A Griffe extension for the docs site: the engine's docstrings use Sphinx roles
(:class:`~openprogram.Runtime`, :func:`x <a.b.x>`), which Markdown shows as they are
written; each becomes inline code naming the object as a reader would (the last part after
``~``, the title when one is given).

mkdocs.yml loads it: ``extensions: [docs_ext/sphinx_roles.py:SphinxRoles]``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`([^`]+)`")
_TITLED = re.compile(r"^(.*?)\s*<([^>]+)>$")


def _name(target: str) -> str:
    titled = _TITLED.match(target)
    if titled:
        return titled.group(1)
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx role replaced by inline code."""
    return _ROLE.sub(lambda m: f"`{_name(m.group(1))}`", text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring Griffe loads."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
