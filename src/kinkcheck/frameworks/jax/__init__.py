"""The jax folder: what kinkcheck knows of this framework, in one place.

``adapter.py``: the adapter (:class:`~kinkcheck.frameworks.jax.adapter.JaxAdapter`); ``kinkhits.py``: the kink-hit
counter (a jaxpr interpreter); ``census.py``: the census of its kinked primitives (``references/census/jax.toml``, from
the JVP rules) — the three modules here that import jax; ``record.py``: its registry record (standard library only, read
by :mod:`kinkcheck.registry`); ``mapping.py``: its functions' rows to sympy; ``snippets.py``: its code templates for
``kinkcheck migrate``; ``bench.py``: its hand-written baseline for ``python -m kinkcheck.dev.bench``.
Importing this package imports none of them; :func:`load` imports the adapter.
"""

from kinkcheck.frameworks.base import adapter_loader

load = adapter_loader(__name__)
