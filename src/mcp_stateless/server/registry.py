"""What an application registers: tools, prompts, resources, templates, completions.

Each registration is compiled once (schemas, validators, header annotations) so that a request only
looks things up.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..protocol.caching import CacheHint
from ..protocol.headers import ParamHeader, param_headers
from .context import Context
from .schema import InputBinding, OutputBinding, input_binding, output_binding, string_converters
from .templates import UriTemplate

# A function the application registered (tool, prompt, resource, completion).
UserFunction = Callable[..., Any]
Converters = dict[str, Callable[[str], Any]]  # parameter -> from the wire's string to its declared type
# Tasks extension: whether a tool may run as a task, and when it becomes one ("start": before the handler
# runs; "manual": when the handler awaits ctx.detach(), so MRTR questions before it stay synchronous).
TaskSupport = Literal["forbidden", "optional", "required"]
DetachMode = Literal["start", "manual"]

_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _check_tool_name(name: str) -> None:
    if not 1 <= len(name) <= 128 or not set(name) <= _NAME_CHARS:
        raise ValueError(f"tool name {name!r} must be 1-128 characters of [A-Za-z0-9_.-]")


def _doc(fn: UserFunction) -> str | None:
    doc = inspect.getdoc(fn)
    return doc.strip() if doc else None


def _scopes(scopes: Sequence[str]) -> frozenset[str]:
    if isinstance(scopes, str) or not all(isinstance(s, str) and s and " " not in s for s in scopes):
        raise ValueError("scopes must be a list of scope tokens (non-empty strings without spaces)")
    return frozenset(scopes)


def _is_async(fn: UserFunction) -> bool:
    call = type(fn).__call__ if not inspect.isroutine(fn) else None  # an instance with an async __call__
    return inspect.iscoroutinefunction(fn) or (call is not None and inspect.iscoroutinefunction(call))


def _put(d: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        d[key] = value


@dataclass(slots=True)
class Tool:
    name: str
    fn: UserFunction
    input: InputBinding
    output: OutputBinding
    description: str | None = None
    title: str | None = None
    annotations: dict[str, Any] | None = None
    icons: list[dict[str, Any]] | None = None
    meta: dict[str, Any] | None = None
    headers: tuple[ParamHeader, ...] = ()
    is_async: bool = False
    descriptor: dict[str, Any] = field(default_factory=dict)
    task: TaskSupport = "forbidden"
    detach: DetachMode = "start"
    retry_safe: bool = False
    blocking: bool = True  # False: a quick sync handler, called on the event loop (no worker thread)
    scopes: frozenset[str] = frozenset()  # OAuth scopes a caller needs to see and call it

    @classmethod
    def build(
        cls,
        fn: UserFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
        output_schema: Mapping[str, Any] | None = None,
        annotations: Mapping[str, Any] | None = None,
        icons: list[dict[str, Any]] | None = None,
        meta: Mapping[str, Any] | None = None,
        injectable: tuple[type, ...] = (Context,),
        task: TaskSupport = "forbidden",
        detach: DetachMode = "start",
        retry_safe: bool = False,
        blocking: bool = True,
        scopes: Sequence[str] = (),
    ) -> Tool:
        if task not in ("forbidden", "optional", "required"):
            raise ValueError('task must be "forbidden", "optional" or "required"')
        if detach not in ("start", "manual"):
            raise ValueError('detach must be "start" or "manual"')
        tool_name = name or fn.__name__
        _check_tool_name(tool_name)
        inp = input_binding(fn, verbatim=input_schema, injectable=injectable)
        out = output_binding(fn, verbatim=output_schema)
        try:
            headers = param_headers(inp.schema)
        except ValueError as e:
            raise ValueError(f"tool {tool_name!r}: {e}") from None
        tool = cls(
            tool_name,
            fn,
            inp,
            out,
            description if description is not None else _doc(fn),
            title,
            dict(annotations) if annotations else None,
            icons,
            dict(meta) if meta else None,
            headers,
            _is_async(fn),
            task=task,
            detach=detach,
            retry_safe=retry_safe,
            blocking=blocking,
            scopes=_scopes(scopes),
        )
        d: dict[str, Any] = {"name": tool_name}
        _put(d, "title", title)
        _put(d, "description", tool.description)
        d["inputSchema"] = inp.schema
        _put(d, "outputSchema", out.schema)
        _put(d, "annotations", tool.annotations)
        _put(d, "icons", icons)
        _put(d, "_meta", tool.meta)
        tool.descriptor = d
        return tool


@dataclass(slots=True)
class PromptArgument:
    name: str
    description: str | None = None
    required: bool = True
    title: str | None = None

    def to_wire(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name}
        _put(d, "title", self.title)
        _put(d, "description", self.description)
        d["required"] = self.required
        return d


@dataclass(slots=True)
class Prompt:
    name: str
    fn: UserFunction
    arguments: list[PromptArgument]
    injected: dict[str, type]
    description: str | None = None
    title: str | None = None
    icons: list[dict[str, Any]] | None = None
    is_async: bool = False
    descriptor: dict[str, Any] = field(default_factory=dict)
    convert: Converters = field(default_factory=dict)
    scopes: frozenset[str] = frozenset()  # OAuth scopes a caller needs to see and use it

    @classmethod
    def build(
        cls,
        fn: UserFunction,
        *,
        name: str | None = None,
        description: str | None = None,
        title: str | None = None,
        arguments: list[PromptArgument] | None = None,
        icons: list[dict[str, Any]] | None = None,
        injectable: tuple[type, ...] = (Context,),
        scopes: Sequence[str] = (),
    ) -> Prompt:
        binding = input_binding(fn, injectable=injectable)
        if arguments is None:
            required = set(binding.schema.get("required", ()))
            props: dict[str, Any] = binding.schema.get("properties", {})
            arguments = [
                PromptArgument(n, p.get("description"), n in required, None) for n, p in props.items()
            ]
        p = cls(
            name or fn.__name__,
            fn,
            arguments,
            binding.injected,
            description if description is not None else _doc(fn),
            title,
            icons,
            _is_async(fn),
            convert=string_converters(fn, binding.injected),
            scopes=_scopes(scopes),
        )
        d: dict[str, Any] = {"name": p.name}
        _put(d, "title", title)
        _put(d, "description", p.description)
        if arguments:
            d["arguments"] = [a.to_wire() for a in arguments]
        _put(d, "icons", icons)
        p.descriptor = d
        return p


@dataclass(slots=True)
class Resource:
    uri: str
    name: str
    fn: UserFunction
    injected: dict[str, type]
    description: str | None = None
    title: str | None = None
    mime_type: str | None = None
    size: int | None = None
    annotations: dict[str, Any] | None = None
    cache: CacheHint | None = None
    is_async: bool = False
    descriptor: dict[str, Any] = field(default_factory=dict)
    convert: Converters = field(default_factory=dict)
    scopes: frozenset[str] = frozenset()  # OAuth scopes a caller needs to see and use it

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"uri": self.uri, "name": self.name}
        _put(d, "title", self.title)
        _put(d, "description", self.description)
        _put(d, "mimeType", self.mime_type)
        _put(d, "size", self.size)
        _put(d, "annotations", self.annotations)
        return d


@dataclass(slots=True)
class ResourceTemplate:
    template: UriTemplate
    name: str
    fn: UserFunction
    injected: dict[str, type]
    description: str | None = None
    title: str | None = None
    mime_type: str | None = None
    annotations: dict[str, Any] | None = None
    cache: CacheHint | None = None
    is_async: bool = False
    descriptor: dict[str, Any] = field(default_factory=dict)
    convert: Converters = field(default_factory=dict)
    scopes: frozenset[str] = frozenset()  # OAuth scopes a caller needs to see and use it

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"uriTemplate": self.template.template, "name": self.name}
        _put(d, "title", self.title)
        _put(d, "description", self.description)
        _put(d, "mimeType", self.mime_type)
        _put(d, "annotations", self.annotations)
        return d


def injected_params(fn: UserFunction, injectable: tuple[type, ...] = (Context,)) -> dict[str, type]:
    return input_binding(fn, injectable=injectable).injected


def _check_variables(uri: str, template: UriTemplate | None, fn: UserFunction, injected: Mapping[str, type]) -> None:
    """Every template variable is a parameter of the handler, and every parameter without a default
    gets a value from the URI: a mismatch would fail every read, so it is refused at registration."""
    kind = "resource template" if template is not None else "resource"
    params: dict[str, bool] = {}  # name -> has a default
    accepts_kwargs = False
    for name, p in inspect.signature(fn).parameters.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD:
            accepts_kwargs = True
        elif name not in injected:
            params[name] = p.default is not inspect.Parameter.empty
    variables = template.variables if template is not None else []
    fname = getattr(fn, "__name__", repr(fn))
    for v in variables:
        if v not in params and not accepts_kwargs:
            raise ValueError(f"{kind} {uri!r}: variable {v!r} is not a parameter of {fname} "
                             f"(parameters: {', '.join(params) or 'none'})")
    for name, has_default in params.items():
        if not has_default and name not in variables:
            raise ValueError(f"{kind} {uri!r}: parameter {name!r} of {fname} has no template variable and no default")


def build_resource(
    uri: str,
    fn: UserFunction,
    *,
    name: str | None = None,
    description: str | None = None,
    title: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    annotations: Mapping[str, Any] | None = None,
    cache: CacheHint | None = None,
    scopes: Sequence[str] = (),
) -> Resource | ResourceTemplate:
    """A resource for a fixed URI or, when `uri` contains `{…}`, a resource template."""
    inj = injected_params(fn)
    desc = description if description is not None else (fn.__doc__ or "").strip() or None
    ann = dict(annotations) if annotations else None
    is_async = _is_async(fn)
    template = UriTemplate(uri) if "{" in uri else None
    _check_variables(uri, template, fn, inj)
    convert = string_converters(fn, inj)
    if template is not None:
        return ResourceTemplate(template, name or fn.__name__, fn, inj, desc, title, mime_type, ann, cache,
                                is_async, convert=convert, scopes=_scopes(scopes))
    return Resource(uri, name or fn.__name__, fn, inj, desc, title, mime_type, size, ann, cache, is_async,
                    convert=convert, scopes=_scopes(scopes))
