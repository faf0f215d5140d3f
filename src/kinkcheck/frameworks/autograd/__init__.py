"""The autograd folder: what kinkcheck knows of this framework, in one place.

``adapter.py``: the adapter (:class:`~kinkcheck.frameworks.autograd.adapter.AutogradAdapter`), the only module here that
imports autograd; ``record.py``: its registry record (standard library only, read by :mod:`kinkcheck.registry`);
``snippets.py``: its code templates for ``kinkcheck migrate``; ``bench.py``: its hand-written baseline for ``python -m
kinkcheck.dev.bench``. Importing this package imports none of them; :func:`load` imports the adapter.
"""

from kinkcheck.frameworks.base import adapter_loader

load = adapter_loader(__name__)
