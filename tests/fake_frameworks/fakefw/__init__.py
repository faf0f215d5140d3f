"""The fake framework's folder (``tests/fakefw``), as a tenth framework's would sit in ``src/kinkcheck/frameworks/``:
``adapter.py``, ``record.py``, ``snippets.py`` and ``bench.py``."""

from kinkcheck.frameworks.base import adapter_loader

load = adapter_loader(__name__)
