"""A notes tool that keeps its notes in this module, as many real tools keep state: the
scenarios beside this file reset it in ``setup:`` so that each passes alone and in its
folder, in any order (``docs/scenarios.md``, "Module state")."""

from openprogram import ToolRegistry, function

registry = ToolRegistry()  # not the default registry: other scenarios' full toolset stays theirs
NOTES: dict[str, str] = {}


def reset() -> None:
    """Forget every note (a scenario's ``setup:``)."""
    NOTES.clear()


async def check_saved() -> None:
    """A scenario's ``teardown:``: the run saved what it said (async, as a teardown may be)."""
    if "milk" not in NOTES:
        raise AssertionError(f"the note 'milk' was not saved; the notes are {sorted(NOTES)}")


@function(registry=registry)
def save_note(title: str, body: str = "") -> str:
    """Save a note under a title; a title is saved once."""
    if title in NOTES:
        return f"a note {title!r} exists already"
    NOTES[title] = body
    return f"saved {title!r}"


@function(registry=registry)
def list_notes() -> list[str]:
    """The titles of every note saved."""
    return sorted(NOTES)
