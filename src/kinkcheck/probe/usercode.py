"""The user's own code, named on the command line as ``MODULE:FUNCTION`` or ``path/to/file.py:FUNCTION``: what
``kinkcheck check`` compares, and the model and data ``kinkcheck census`` and ``kinkcheck lock`` run. Standard library
only; the module named is imported, nothing else.
"""

from __future__ import annotations

import importlib
import importlib.util  # a submodule: `import importlib` alone does not load it
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["UserCodeError", "load_function"]


class UserCodeError(ValueError):
    """The function named cannot be loaded; ``str(err)`` is one line."""


def load_function(spec: str) -> Callable[..., Any]:
    """``"module:function"`` or ``"path/to/file.py:function"`` → the function (the module is imported).

    A module is imported from ``sys.path`` with the current folder first, as ``python -m`` does; a file is
    executed as a module of its own (its folder joins ``sys.path``, so it can import the modules beside it).

    Raises
    ------
    UserCodeError
        Malformed spec, no such file, module or file not importable (syntax error, failing import: the
        first line of its error), no such callable.
    """
    module, sep, name = spec.rpartition(":")
    if not sep or not module or not name:
        raise UserCodeError(f"expected MODULE:FUNCTION or path/to/file.py:FUNCTION, got {spec!r}")
    try:
        if module.endswith(".py") or "/" in module:
            path = Path(module)
            if not path.is_file():
                raise UserCodeError(f"no file {module}")
            spec_ = importlib.util.spec_from_file_location(path.stem, path)
            if spec_ is None or spec_.loader is None:
                raise UserCodeError(f"{module} is not a Python file (expected path/to/file.py:FUNCTION)")
            folder = str(path.resolve().parent)
            if folder not in sys.path:
                sys.path.insert(0, folder)  # its own imports find the modules beside it, as `python file.py` would
            mod = importlib.util.module_from_spec(spec_)
            spec_.loader.exec_module(mod)
        else:
            if "" not in sys.path:
                sys.path.insert(0, "")  # the current folder, as `python -m` would
            mod = importlib.import_module(module)
    except UserCodeError:
        raise
    except SystemExit as err:  # sys.exit() at the module's top level: kinkcheck would exit with its status
        raise UserCodeError(f"cannot import {module}: it called sys.exit({err.code!r}) on import") from None
    except Exception as err:  # noqa: BLE001 - the user's module failed to import: one line
        raise UserCodeError(f"cannot import {module}: {type(err).__name__}: {err}") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise UserCodeError(f"{module} has no function {name!r}")
    return fn
