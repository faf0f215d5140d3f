"""The framework registry: one record per autodiff framework kinkcheck measures.

Everything that names a framework reads it here: the catalog's framework keys
(:data:`kinkcheck.catalog.FRAMEWORKS`), the adapter modules (:func:`kinkcheck.frameworks.get_adapter`), each
framework's modes (:data:`kinkcheck.frameworks.base.FRAMEWORK_MODES`), the installed distribution the probe
records, the CLI's ``--framework`` choices, the display name a citation uses and the marker of the report's
plots. A leaf module (standard library only): the noxfile imports it into nox's own Python.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FRAMEWORKS", "REGISTRY", "Framework", "framework"]


@dataclass(frozen=True)
class Framework:
    """One framework.

    Attributes
    ----------
    name : str
        The key used everywhere (catalog program tables, shard environments, ``--framework``): ``"torch"``.
    display : str
        How prose names it: ``"PyTorch"``.
    distribution : str
        The package-index distribution whose version an environment records (``importlib.metadata``).
    adapter : str
        The module of its adapter (:class:`kinkcheck.frameworks.base.Adapter`), imported lazily.
    modes : tuple of str
        The differentiation modes its adapter implements, report order (a subset of
        :data:`kinkcheck.frameworks.base.MODES`).
    marker : tuple of (str, str)
        Matplotlib marker and colour of its measured values in the report's plots.
    """

    name: str
    display: str
    distribution: str
    adapter: str
    modes: tuple[str, ...]
    marker: tuple[str, str]


#: Framework name → record, report order.
REGISTRY: dict[str, Framework] = {f.name: f for f in (
    Framework("torch", "PyTorch", "torch", "kinkcheck.frameworks.torch",
              ("reverse", "functional", "forward", "forward-ad", "inductor", "aot_eager", "vmap", "second-order"),
              ("o", "#d62728")),
    Framework("jax", "JAX", "jax", "kinkcheck.frameworks.jax",
              ("reverse", "jit", "forward", "jacfwd", "jacrev", "vmap", "second-order"), ("s", "#1f77b4")),
)}
#: The registered framework names, report order.
FRAMEWORKS: tuple[str, ...] = tuple(REGISTRY)


def framework(name: str) -> Framework:
    """The record of ``name``.

    Raises
    ------
    KeyError
        With a one-line message naming the known frameworks.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown framework {name!r} (known: {', '.join(REGISTRY)})") from None
