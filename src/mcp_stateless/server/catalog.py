"""What an app offers right now: its tools, prompts, resources, templates and completions, what it
declares, the capabilities that follow, and the method set the envelope ladder checks against."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from ..protocol import methods
from ..protocol.envelope import Request
from ..protocol.headers import ParamHeader
from .registry import Prompt, Resource, ResourceTemplate, Tool

ListKind = Literal["tools", "prompts", "resources"]
ExtraMethod = Callable[[Request, str], Awaitable[dict[str, Any]]]  # (request, principal id) -> result


class Catalog:
    """The registrations of one app. Every change calls `on_change` with the list that changed."""

    def __init__(self, on_change: Callable[[ListKind], None]) -> None:
        self._on_change = on_change
        self.tools: dict[str, Tool] = {}
        self.prompts: dict[str, Prompt] = {}
        self.resources: dict[str, Resource] = {}
        self.templates: dict[str, ResourceTemplate] = {}
        self.completions: dict[tuple[str, str], Callable[..., Any]] = {}
        self.extra_methods: dict[str, ExtraMethod] = {}  # an extension's methods (tasks/*)
        self.extensions: dict[str, dict[str, Any]] = {}
        self.declared: set[str] = set()
        self.methods = _Methods(self)

    # -- changes ---------------------------------------------------------------------------
    # A second registration under a taken name is a mistake (two handlers, one silently lost), never a
    # replacement: replacing on purpose is remove, then add.
    def add_tool(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is already registered (remove_tool({tool.name!r}) first to "
                             "replace it)")
        self.tools[tool.name] = tool
        self._on_change("tools")

    def remove_tool(self, name: str) -> bool:
        found = self.tools.pop(name, None) is not None
        if found:
            self._on_change("tools")
        return found

    def add_prompt(self, prompt: Prompt) -> None:
        if prompt.name in self.prompts:
            raise ValueError(f"prompt {prompt.name!r} is already registered (remove_prompt({prompt.name!r}) first "
                             "to replace it)")
        self.prompts[prompt.name] = prompt
        self._on_change("prompts")

    def remove_prompt(self, name: str) -> bool:
        found = self.prompts.pop(name, None) is not None
        if found:
            self._on_change("prompts")
        return found

    def add_resource(self, resource: Resource | ResourceTemplate) -> None:
        if isinstance(resource, ResourceTemplate):
            key = resource.template.template
            if key in self.templates:
                raise ValueError(f"resource template {key!r} is already registered (remove_resource({key!r}) "
                                 "first to replace it)")
            self.templates[key] = resource
        else:
            if resource.uri in self.resources:
                raise ValueError(f"resource {resource.uri!r} is already registered (remove_resource("
                                 f"{resource.uri!r}) first to replace it)")
            self.resources[resource.uri] = resource
        self._on_change("resources")

    def remove_resource(self, uri_or_template: str) -> bool:
        found = (self.resources.pop(uri_or_template, None) or self.templates.pop(uri_or_template, None)) is not None
        if found:
            self._on_change("resources")
        return found

    # -- what follows from them ------------------------------------------------------------
    @property
    def declares_tools(self) -> bool:
        return bool(self.tools) or "tools" in self.declared

    @property
    def declares_prompts(self) -> bool:
        return bool(self.prompts) or "prompts" in self.declared

    @property
    def declares_resources(self) -> bool:
        return bool(self.resources or self.templates) or "resources" in self.declared

    @property
    def declares_subscriptions(self) -> bool:
        return self.declares_resources  # an app announces every resource change it is told of

    def resource_scopes(self, uri: str) -> frozenset[str]:
        found = self.find_resource(uri)
        return found[0].scopes if found is not None else frozenset()

    def scopes(self) -> list[str]:
        """Every OAuth scope the registered tools, prompts and resources need, sorted: what `serve` lists as
        the metadata's `scopes_supported` (RFC 9728), so a client can register for a later step-up."""
        entries: list[Tool | Prompt | Resource | ResourceTemplate] = [
            *self.tools.values(), *self.prompts.values(), *self.resources.values(), *self.templates.values()]
        return sorted({scope for e in entries for scope in e.scopes})

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.declares_tools:
            caps["tools"] = {"listChanged": True}
        if self.declares_prompts:
            caps["prompts"] = {"listChanged": True}
        if self.declares_resources:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        if self.completions:
            caps["completions"] = {}
        caps["logging"] = {}
        if self.extensions:
            caps["extensions"] = {k: dict(v) for k, v in self.extensions.items()}
        return caps

    def tool_headers(self, name: str) -> tuple[ParamHeader, ...] | None:
        tool = self.tools.get(name)
        return tool.headers if tool is not None else None

    def find_resource(self, uri: str) -> tuple[Resource | ResourceTemplate, dict[str, str]] | None:
        res = self.resources.get(uri)
        if res is not None:
            return res, {}
        for tpl in self.templates.values():
            found = tpl.template.match(uri)
            if found is not None:
                return tpl, found
        return None

    def add_extension(self, extension_id: str, methods: Mapping[str, ExtraMethod]) -> None:
        self.extensions[extension_id] = {}
        self.extra_methods.update(methods)


# What the app must declare to answer each of its own methods (the method table's capability): "any"
# for subscriptions/listen, which streams changes of whatever is declared; "" for server/discover.
_NEEDS: dict[str, str] = {
    name: methods.CLIENT[name].capability or ("any" if name == "subscriptions/listen" else "")
    for name in methods.APP_METHODS
}


class _Methods:
    """The methods the app answers right now: a `Container` for the envelope ladder. Which ones exist
    and the capability each needs are the method table's (protocol/methods.py); whether the capability
    is declared is this catalog's."""

    __slots__ = ("_catalog",)

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    def __contains__(self, method: object) -> bool:
        # perf: one dict lookup decides which declaration answers (this runs for every request)
        need = _NEEDS.get(method)  # type: ignore[call-overload]  # any object may be asked; a str is
        c = self._catalog
        if need is None:
            return method in c.extra_methods
        if need == "tools":
            return c.declares_tools
        if need == "resources":
            return c.declares_resources
        if need == "prompts":
            return c.declares_prompts
        if need == "completions":
            return bool(c.completions)
        if need == "any":
            return c.declares_tools or c.declares_prompts or c.declares_resources
        return True  # server/discover
