"""`mcp-stateless … | head`: when the reader of stdout goes away the command ends quietly with 141 (the
status of a command killed by SIGPIPE), not a BrokenPipeError traceback. Driven in process on a real pipe
whose read end is closed."""

from __future__ import annotations

import io
import os

import pytest

from mcp_stateless.cli import BROKEN_PIPE, main


def test_a_closed_stdout_ends_quietly_with_141(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    r, w = os.pipe()
    os.close(r)  # the reader (`head`) has gone: every write to w is EPIPE
    out = io.TextIOWrapper(io.FileIO(w, "w"), write_through=False)
    with capsys.disabled():
        monkeypatch.setattr("sys.stdout", out)
        status = main([])  # prints the help on stdout
        monkeypatch.undo()
    assert status == BROKEN_PIPE == 141
    out.close()  # stdout now points at /dev/null: what was still buffered goes there, without a second error
