"""JSON Schema (2020-12) for handlers: derived from type hints through pydantic, or given verbatim.

A verbatim schema is kept exactly as written (`$defs`, `$ref`, `allOf`, `if/then/else`, …) and
validated with `jsonschema`; network `$ref`s are never fetched (no retriever is registered).
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_type_hints

import jsonschema
import pydantic
import typing_extensions
from jsonschema.exceptions import ValidationError as JsonSchemaValidationError
from referencing.exceptions import Unresolvable

from .typeddicts import compatible


def empty_object_schema() -> dict[str, Any]:
    """The input schema of a tool without arguments. `properties: {}` is not required by JSON Schema, but
    every peer writes it and some clients' adapters refuse a tool (or the whole server) without it."""
    return {"type": "object", "properties": {}, "additionalProperties": False}


class ArgumentError(Exception):
    """Arguments did not match the input schema: reported to the model as an `isError` result."""


def _strip_title(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    return schema


def compile_validator(schema: Mapping[str, Any]) -> Callable[[Any], None]:
    """A function that raises ArgumentError when `value` does not validate against `schema`."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(dict(schema))
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)

    def validate(value: Any) -> None:
        try:
            err = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except Unresolvable as e:
            raise ArgumentError(f"schema reference cannot be resolved: {e}") from None
        if err is not None:
            raise ArgumentError(_describe(err))

    return validate


def _describe(err: JsonSchemaValidationError) -> str:
    where = "/".join(str(p) for p in err.absolute_path)
    return f"{where}: {err.message}" if where else err.message


def _describe_pydantic(exc: pydantic.ValidationError) -> str:
    parts = []
    for e in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else e["msg"])
    return "; ".join(parts)


def _unwrap_optional(ann: Any) -> Any:
    """`X | None` / `Optional[X]` -> X; anything else unchanged."""
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


@dataclasses.dataclass(slots=True)
class InputBinding:
    """How `arguments` become keyword arguments of the handler."""

    schema: dict[str, Any]
    bind: Callable[[Mapping[str, Any]], dict[str, Any]]
    injected: dict[str, type]  # parameter name -> injected type (Context, handles…)


def input_binding(
    fn: Callable[..., Any],
    *,
    verbatim: Mapping[str, Any] | None = None,
    injectable: tuple[type, ...] = (),
) -> InputBinding:
    sig = inspect.signature(fn)
    hints = get_type_hints(fn, include_extras=True)
    injected: dict[str, type] = {}
    fields: dict[str, Any] = {}
    accepts_kwargs = False
    for name, p in sig.parameters.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_kwargs = True
            continue
        if p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.POSITIONAL_ONLY):
            raise TypeError(f"{fn.__qualname__}: parameter {name!r} must be passable by keyword")
        ann = hints.get(name, Any)
        base = _unwrap_optional(ann)  # `ctx: Context | None = None` is injected too
        inj = next((t for t in injectable if isinstance(base, type) and issubclass(base, t)), None)
        if inj is not None:
            injected[name] = base
            # A resolved type (a handle) stays a string argument; the framework resolves it before the call.
            argument = getattr(base, "__mcp_argument__", None)
            if argument is None:
                continue
            ann = argument()
        default = ... if p.default is inspect.Parameter.empty else p.default
        fields[name] = (compatible(ann), default)

    if verbatim is not None:
        schema = dict(verbatim)
        check = compile_validator(schema)
        names = set(fields)

        def bind_verbatim(arguments: Mapping[str, Any]) -> dict[str, Any]:
            check(dict(arguments))
            if accepts_kwargs:
                return dict(arguments)
            return {k: v for k, v in arguments.items() if k in names}

        return InputBinding(schema, bind_verbatim, injected)

    if not fields:

        def bind_none(arguments: Mapping[str, Any]) -> dict[str, Any]:
            return {}

        return InputBinding(empty_object_schema(), bind_none, injected)

    model = pydantic.create_model(
        f"{fn.__name__}_arguments", __config__=pydantic.ConfigDict(arbitrary_types_allowed=True), **fields
    )
    schema = _strip_title(model.model_json_schema())
    names_t = tuple(fields)

    def bind_model(arguments: Mapping[str, Any]) -> dict[str, Any]:
        try:
            m = model.model_validate(arguments)
        except pydantic.ValidationError as e:
            raise ArgumentError(_describe_pydantic(e)) from None
        return {n: getattr(m, n) for n in names_t}

    return InputBinding(schema, bind_model, injected)


_PRIMITIVES = (str, int, float, bool, bytes, type(None))
_SCALARS = (str, int, float, bool, type(None))
_SEQUENCES = (list, tuple, set, frozenset)


@dataclasses.dataclass(slots=True)
class OutputBinding:
    """The declared output schema and how a return value becomes `structuredContent`."""

    schema: dict[str, Any] | None
    to_structured: Callable[[Any], Any] | None  # None: the value is not structured output
    check: Callable[[Any], None] | None
    wrapped: bool  # the value sits under {"result": …} because the schema is not an object


def _is_record(ann: Any) -> bool:
    """A type whose values are JSON objects with known fields: a pydantic model, a dataclass, a TypedDict."""
    return (isinstance(ann, type) and (issubclass(ann, pydantic.BaseModel) or dataclasses.is_dataclass(ann))) \
        or typing_extensions.is_typeddict(ann)


def _is_content(ann: Any) -> bool:
    """Whether `ann` says the tool returns content, never structured output: `content.ContentBlock`, a
    `ToolResult`, or a list or union with one of them (such types carry `__mcp_content__`)."""
    if getattr(ann, "__mcp_content__", False):
        return True
    if typing.get_origin(ann) is typing.Annotated:
        return any(getattr(m, "__mcp_content__", False) for m in ann.__metadata__) or _is_content(
            typing.get_args(ann)[0])
    return any(_is_content(a) for a in typing.get_args(ann) if a is not Ellipsis)


def _is_union(origin: Any) -> bool:
    return origin in (typing.Union, types.UnionType)


def _plain_item(ann: Any) -> bool:
    """Whether values of `ann` inside a list are plain data. `Any`, `object` and loose dicts are not:
    a list of them may be content blocks (`[{"type": "text", …}]`), which stay content."""
    if ann in _SCALARS or _is_record(ann):
        return True
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return _plain_item(typing.get_args(ann)[0])
    args = [a for a in typing.get_args(ann) if a is not Ellipsis]
    if origin in _SEQUENCES or origin is dict or _is_union(origin):
        return bool(args) and all(_plain_item(a) for a in args)
    return False


def _structured_kind(ann: Any) -> Literal["object", "wrapped"] | None:
    """How a return annotation becomes structured output: as the object itself, wrapped under
    `result` (lists, unions: not objects), or not at all (scalars, `Any`, anything unknown)."""
    if _is_record(ann):
        return "object"
    origin = typing.get_origin(ann)
    if ann is dict or origin is dict:
        return "object"
    args = [a for a in typing.get_args(ann) if a is not Ellipsis]
    if origin in _SEQUENCES:
        return "wrapped" if args and all(_plain_item(a) for a in args) else None
    if _is_union(origin):
        members = [a for a in args if a is not type(None)]
        return "wrapped" if members and all(_structured_kind(a) is not None for a in members) else None
    return None


def output_binding(fn: Callable[..., Any], *, verbatim: Mapping[str, Any] | None = None) -> OutputBinding:
    if verbatim is not None:
        schema = dict(verbatim)
        return OutputBinding(schema, _dump_json, compile_validator(schema), False)
    ann = get_type_hints(fn, include_extras=True).get("return", inspect.Signature.empty)
    if ann is inspect.Signature.empty or ann is Any or ann in _PRIMITIVES or _is_content(ann):
        return OutputBinding(None, None, None, False)
    kind = _structured_kind(ann)
    if kind is None:
        return OutputBinding(None, None, None, False)
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(compatible(ann))
        schema = _strip_title(adapter.json_schema(mode="serialization"))
    except pydantic.PydanticUserError as e:
        # Not swallowed: the annotation promises structured output, and a tool that silently lost it would
        # be a different tool from the one its author wrote.
        raise TypeError(
            f"{fn.__qualname__}: the return type {ann!r} has no JSON Schema ({e.message}); annotate the return "
            "as `Any` for plain content, or give output_schema="
        ) from None
    if kind == "wrapped":
        # The tool's output schema must be an object (MCP), so a list or a union sits under `result`
        # (as the peers do); `$defs` move to the root, where the `$ref`s inside point.
        defs = schema.pop("$defs", None)
        schema = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
        if defs:
            schema["$defs"] = defs

    def dump(value: Any) -> Any:
        return adapter.dump_python(value, mode="json")

    return OutputBinding(schema, dump, None, kind == "wrapped")


_ARBITRARY = pydantic.ConfigDict(arbitrary_types_allowed=True)


def string_converters(fn: Callable[..., Any], injected: Mapping[str, type]) -> dict[str, Callable[[str], Any]]:
    """For the parameters that receive strings from the wire (prompt arguments, URI-template
    variables) but are annotated otherwise (`times: int`): a converter from the string, lax as pydantic
    is ('3' -> 3, 'true' -> True), raising ArgumentError. Parameters typed `str` (or not at all) need none."""
    hints = get_type_hints(fn, include_extras=True)
    out: dict[str, Callable[[str], Any]] = {}
    for name, p in inspect.signature(fn).parameters.items():
        if name in injected or p.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        ann = hints.get(name, Any)
        if ann is Any or _unwrap_optional(ann) is str:
            continue
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ann)
        except pydantic.PydanticSchemaGenerationError:  # a class pydantic does not know: an isinstance check
            adapter = pydantic.TypeAdapter(ann, config=_ARBITRARY)
        out[name] = _converter(name, adapter)
    return out


def _converter(name: str, adapter: pydantic.TypeAdapter[Any]) -> Callable[[str], Any]:
    def convert(value: str) -> Any:
        try:
            return adapter.validate_python(value)
        except pydantic.ValidationError as e:
            raise ArgumentError(f"{name}: {_describe_pydantic(e)}") from None

    return convert


def _dump_json(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value
