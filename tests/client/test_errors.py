"""One root for everything the client raises: `except ClientError` catches an error the server answered
with, a lost or refused channel, a timeout and a failed or cancelled task; each keeps its older, broader
meaning too (`ServerError` is an `McpError`, `RequestTimeout` a `TimeoutError`)."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil

import pytest

import mcp_stateless.client
from mcp_stateless import App, Client, McpError, TaskRuntime
from mcp_stateless.client import (
    ChannelError,
    ClientError,
    RequestTimeout,
    ServerError,
    TaskCancelled,
)
from services import free_port


def _client_exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of the client package (read from each module's `vars()`,
    so a new one cannot be forgotten), private ones included: they may escape too."""
    found: dict[str, type[BaseException]] = {}
    modules = [mcp_stateless.client, *(
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(mcp_stateless.client.__path__, "mcp_stateless.client."))]
    for module in modules:
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_exception_class_of_the_client_derives_from_the_one_root() -> None:
    classes = _client_exception_classes()
    assert len(classes) >= 15, sorted(classes)  # the walk really saw the package (errors, http11, legacy, oauth)
    assert sorted(n for n, c in classes.items() if not issubclass(c, ClientError)) == []


def test_the_root_keeps_the_older_meanings() -> None:
    assert issubclass(ServerError, McpError) and issubclass(RequestTimeout, TimeoutError)
    assert issubclass(TaskCancelled, ClientError) and issubclass(ChannelError, ClientError)
    # the root is not an McpError: a handler's McpError on the server side is not a client failure
    assert not issubclass(ClientError, McpError) and not issubclass(McpError, ClientError)


def make_app() -> App:
    app = App("errors", tasks=TaskRuntime(poll_interval_ms=20))

    @app.tool(task="optional")
    async def sleepy(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "woke"

    @app.tool(task="optional")
    async def broken() -> str:
        raise McpError(-32099, "broken on purpose", {"why": "test"})

    return app


async def test_an_error_answer_is_a_server_error_with_what_the_server_sent() -> None:
    async with Client(make_app()) as c:
        with pytest.raises(ClientError) as e:
            await c.call_tool("nope", {})
        assert type(e.value) is ServerError and isinstance(e.value, McpError) and e.value.code == -32602
        with pytest.raises(ServerError) as e:
            await c.call_tool("broken", {})
        assert (e.value.code, e.value.message, e.value.data) == (-32099, "broken on purpose", {"why": "test"})


async def test_a_timeout_is_a_request_timeout() -> None:
    async with Client(make_app(), timeout=0.2) as c:
        with pytest.raises(ClientError) as e:
            await c.call_tool("sleepy", {"seconds": 5})
    assert type(e.value) is RequestTimeout and isinstance(e.value, TimeoutError)
    assert str(e.value).endswith("timed out after 0.2 s"), str(e.value)


async def test_a_failed_task_is_a_server_error_and_a_cancelled_one_task_cancelled() -> None:
    async with Client(make_app(), tasks=True) as c:
        failed = await c.start_tool("broken", {})
        with pytest.raises(ServerError) as e:
            await failed
        assert e.value.code == -32099
        slow = await c.start_tool("sleepy", {"seconds": 30})
        assert slow.task_id is not None
        await slow.cancel()
        with pytest.raises(ClientError) as cancelled:
            await slow
        assert type(cancelled.value) is TaskCancelled


async def test_a_refused_connection_is_a_channel_error() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(ClientError) as e:
        async with Client(f"http://127.0.0.1:{port}/mcp", timeout=5, probe_timeout=5):
            pass
    assert isinstance(e.value, ChannelError), repr(e.value)
