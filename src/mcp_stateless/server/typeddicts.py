"""`typing.TypedDict` before Python 3.12, made describable by pydantic.

pydantic refuses a `typing.TypedDict` on Python < 3.12 (it needs the runtime information that
`typing_extensions.TypedDict` keeps there), and most code declares its TypedDicts with `typing`. So an
annotation is rewritten before pydantic sees it: each `typing.TypedDict` class, also nested in `list[...]`,
`X | None`, `Annotated[...]` or another TypedDict's fields, becomes a `typing_extensions.TypedDict` with
the same name, docstring, fields and required keys. On 3.12 and later nothing is rewritten.
"""

from __future__ import annotations

import sys
import types
import typing
from typing import Any

import typing_extensions

NEEDED = sys.version_info < (3, 12)

_QUALIFIERS = frozenset({typing_extensions.Required, typing_extensions.NotRequired, typing_extensions.ReadOnly})


def compatible(ann: Any) -> Any:
    """`ann` with every `typing.TypedDict` in it replaced by an equivalent pydantic accepts (unchanged
    when there is none, or on Python 3.12+)."""
    if not NEEDED:
        return ann
    return _rewrite(ann, {})


def _is_typing_typeddict(ann: Any) -> bool:
    return isinstance(ann, type) and typing_extensions.is_typeddict(ann) and type(ann).__module__ == "typing"


def _rewrite(ann: Any, done: dict[Any, Any]) -> Any:
    if _is_typing_typeddict(ann):
        return _replacement(ann, done)
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is None or not args or origin is typing.Literal:
        return ann
    new = tuple(a if a is Ellipsis else _rewrite(a, done) for a in args)
    if all(n is a for n, a in zip(new, args, strict=True)):
        return ann  # the common case: nothing inside needed it, keep the very object
    if origin is typing.Annotated:
        return typing.Annotated[(new[0], *ann.__metadata__)]
    if origin in (typing.Union, types.UnionType):
        return typing.Union[new]  # noqa: UP007 - built from a tuple of members
    if origin in _QUALIFIERS:
        return origin[new[0]]
    return origin[new]  # list[...], dict[...], tuple[...], collections.abc generics


def _replacement(td: Any, done: dict[Any, Any]) -> Any:
    known = done.get(td)
    if known is not None:
        return known
    # Created empty and filled after, so a TypedDict that refers to itself (a tree) finds its replacement.
    make: Any = typing_extensions.TypedDict  # the functional form, with a name known only at run time
    new: Any = make(td.__name__, {})
    done[td] = new
    hints = typing.get_type_hints(td, include_extras=True)
    required = set(td.__required_keys__)
    for name, hint in hints.items():
        # Under `from __future__ import annotations` typing (3.11) sees strings and misses `Required[...]`
        # and `NotRequired[...]` in them; the resolved hints still have them.
        qualifier = typing.get_origin(hint)
        if qualifier is typing_extensions.Required:
            required.add(name)
        elif qualifier is typing_extensions.NotRequired:
            required.discard(name)
    new.__annotations__ = {name: _rewrite(_unqualified(hint), done) for name, hint in hints.items()}
    new.__required_keys__ = frozenset(required)
    new.__optional_keys__ = frozenset(hints) - new.__required_keys__
    new.__readonly_keys__ = frozenset(getattr(td, "__readonly_keys__", ()))
    new.__mutable_keys__ = frozenset(hints) - new.__readonly_keys__
    new.__doc__ = td.__doc__
    new.__module__ = td.__module__
    new.__qualname__ = td.__qualname__
    config = getattr(td, "__pydantic_config__", None)
    if config is not None:
        new.__pydantic_config__ = config
    return new


def _unqualified(hint: Any) -> Any:
    """A field's type without `Required[...]`/`NotRequired[...]`: the key sets say which keys are required."""
    while typing.get_origin(hint) in _QUALIFIERS:
        hint = typing.get_args(hint)[0]
    return hint
