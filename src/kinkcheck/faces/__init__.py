"""The commands of ``kinkcheck``, one module each: ``add_parser(subparsers)`` adds the command and its options,
``run(args)`` runs it and returns the exit status, ``POSITION`` places it in ``kinkcheck --help``.

A new command is one new module here (:func:`faces` finds it); :mod:`kinkcheck.cli` loops over them. A face
imports :mod:`kinkcheck.faces.shared` and the layers below (docs/architecture.md), never another face (a test).
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

#: The modules of this package that are not commands.
NOT_FACES = frozenset({"shared"})


def names() -> list[str]:
    """The faces' module names, unordered: every module of this package but :data:`NOT_FACES`."""
    return [m.name for m in pkgutil.iter_modules(__path__) if m.name not in NOT_FACES and not m.name.startswith("_")]


def faces() -> list[ModuleType]:
    """Every face, imported, in the order ``kinkcheck --help`` lists them (``POSITION``, then name)."""
    mods = [importlib.import_module(f"{__name__}.{name}") for name in names()]
    return sorted(mods, key=lambda m: (m.POSITION, m.__name__))
