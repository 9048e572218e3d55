"""Finding the app `serve` was pointed at: `module:attr` or `path/to/file.py:attr`."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from .base import CliError

if TYPE_CHECKING:
    from ..server.app import App


def load_app(spec: str) -> App:
    """Import `module:attr` or `path/to/file.py:attr` (attr defaults to `app`); a callable that is not an
    App is a factory and is called. Every failure is one `CliError` line naming the spec."""
    from ..server.app import App

    target, _, attr = spec.partition(":")
    attr = attr or "app"
    if not target:
        raise CliError(f"invalid APP {spec!r}: expected module:attr or path/to/file.py:attr")
    if target.endswith(".py") or os.sep in target:
        path = Path(target)
        if not path.is_file():
            raise CliError(f"cannot load {spec!r}: file {target} does not exist")
        sys.path.insert(0, str(path.resolve().parent))
        mod_name = "_mcp_app_" + path.stem
        loader_spec = importlib.util.spec_from_file_location(mod_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise CliError(f"cannot load {spec!r}: not a Python file")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[mod_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except Exception as e:
            _print_traceback(e)
            raise CliError(f"cannot load {spec!r}: {_describe(e)}") from None
    else:
        # As uvicorn does: the working directory is on the path, so `serve notes:app` finds ./notes.py.
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as e:
            if e.name is not None and (target == e.name or target.startswith(e.name + ".")):
                raise CliError(f"cannot load {spec!r}: no module named {e.name!r} on the import path. "
                               + _NOT_ON_PATH) from None
            _print_traceback(e)  # the module exists; something it imports does not
            raise CliError(f"cannot load {spec!r}: {_describe(e)}") from None
        except Exception as e:
            _print_traceback(e)
            raise CliError(f"cannot load {spec!r}: {_describe(e)}") from None
    obj = getattr(module, attr, None)
    if obj is None:
        raise CliError(f"cannot load {spec!r}: {target} has no attribute {attr!r}")
    if callable(obj) and not isinstance(obj, App):
        try:
            obj = obj()  # a factory
        except Exception as e:
            _print_traceback(e)
            raise CliError(f"cannot load {spec!r}: calling {attr}() to build the app raised "
                           f"{type(e).__name__}: {e}") from None
    if not isinstance(obj, App):
        raise CliError(f"cannot load {spec!r}: {attr} is a {type(obj).__name__}, not an mcp_stateless.App")
    return obj


_NOT_ON_PATH = ("Give a file path (path/to/app.py:app), run from the directory that contains the module, or "
                "add that directory to PYTHONPATH.")


def _print_traceback(e: Exception) -> None:
    """The user's own frames: the one-line summary alone does not say where in their code it broke
    (`--log-level debug`: every frame, the loader's and importlib's too)."""
    if logging.getLogger("mcp_stateless").isEnabledFor(logging.DEBUG):
        sys.stderr.write("".join(traceback.format_exception(e)))
        return
    if isinstance(e, SyntaxError):
        return  # the summary names the file and line already
    tb = e.__traceback__
    # Skip the loader's and importlib's frames so the trace starts in the user's module.
    while tb is not None and not _is_user_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    if tb is not None:  # no frame of theirs (e.g. a factory called with the wrong arguments): the line says it all
        sys.stderr.write("".join(traceback.format_exception(type(e), e, tb)))


_IMPORTLIB_DIR = os.path.dirname(importlib.__file__)


def _is_user_frame(filename: str) -> bool:
    return (filename != __file__ and not filename.startswith("<frozen importlib")
            and os.path.dirname(filename) != _IMPORTLIB_DIR)


def _describe(e: Exception) -> str:
    if isinstance(e, SyntaxError):
        return f"syntax error in {e.filename}, line {e.lineno}: {e.msg}"
    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.split(".")[0]
        return (f"importing it raised ModuleNotFoundError: {e} (is {top!r} installed in this environment, "
                f"{sys.prefix}? e.g. {Path(sys.executable).parent / 'pip'} install {top})")
    return f"importing it raised {type(e).__name__}: {e}"
