"""The framework registry: one record per autodiff framework kinkcheck measures, read from the framework's folder
(``frameworks/<name>/record.py``, :func:`_discover`); its releases are its line of ``matrix.toml``.

Everything that names a framework reads it here: the catalog's framework keys and program files
(:data:`kinkcheck.catalog.FRAMEWORKS`), the expression language's roots and aliases (``tf`` =
``tensorflow``), the adapter modules (:func:`kinkcheck.frameworks.get_adapter`), each framework's modes and
dtypes, the installed distribution the probe records, the CLI's ``--framework`` choices, the shard schema's
enum, the display name a citation uses, the marker of the report's plots, the conformance rule, and the
noxfile's version matrix and install requirements. A leaf module (standard library only): the noxfile
imports it into nox's own Python.

The module-level collections (:data:`FRAMEWORKS`, and the views other modules build with :func:`view`)
read :data:`REGISTRY` on every access, so a framework added with :func:`register` (the tests' fake
framework) reaches every consumer without an import-time copy going stale.
"""

from __future__ import annotations

import contextlib
import importlib.util
import tomllib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["DOCUMENTED_FAMILIES", "FOLDERS", "FRAMEWORKS", "MATRIX", "REGISTRY", "Framework", "aliases", "framework",
           "read_record", "register", "registered", "version_tuple", "view"]

#: Kinds of documented per-function choice a rule can name (``Framework.documented``):
#: ``zero`` — the derivative at the kink of a one-input function is 0 (``jax.nn.relu``);
#: ``even`` — the derivative is shared evenly among tied arguments or entries (the Clarke set's midpoint);
#: ``first`` — a tie goes to the first argument (its piece's gradient: ``tf.maximum``'s ``x >= y`` mask);
#: ``min-norm`` — PyTorch's autograd-notes rule: the minimum-norm subgradient (supergradient) where f is locally
#: convex (concave), else a limiting gradient "by continuity"; under the key ``"*"`` it covers every single
#: operation of the framework.
DOCUMENTED_FAMILIES: tuple[str, ...] = ("zero", "even", "first", "min-norm")


def _read_matrix() -> dict[str, tuple[str, ...]]:
    """Framework → its default version matrix, from ``matrix.toml`` beside this module (by path, not through
    the package: the noxfile loads this module on its own)."""
    data = tomllib.loads(Path(__file__).with_name("matrix.toml").read_text(encoding="utf-8"))
    return {name: tuple(versions) for name, versions in data.items()}


#: Framework → the releases ``nox -s report`` probes, oldest first (``matrix.toml``; ``nox -s releases`` lists
#: the release lines published since and ``-- --write`` appends them).
MATRIX: Mapping[str, tuple[str, ...]] = _read_matrix()


def version_tuple(v: str) -> tuple[int, ...]:
    """``"2.13.0"`` → ``(2, 13, 0)`` (parts that are not numbers left out), for a record's release comparisons."""
    return tuple(int(p) for p in v.split(".") if p.isdigit())


@dataclass(frozen=True)
class Framework:
    """One framework.

    Attributes
    ----------
    name : str
        The key used everywhere (program files, shard environments, ``--framework``) and the root name of
        its call expressions: ``"torch"``, ``"tensorflow"``.
    display : str
        How prose names it: ``"PyTorch"``.
    distribution : str
        The package-index distribution whose version an environment records (``importlib.metadata``).
    adapter : str
        The module of its adapter (:class:`kinkcheck.frameworks.base.Adapter`), imported lazily.
    modes : tuple of str
        The differentiation modes its adapter implements, report order (a subset of
        :data:`kinkcheck.vocabulary.MODES`); ``reverse`` first.
    marker : tuple of (str, str)
        Matplotlib marker and colour of its measured values in the report's plots.
    aliases : dict
        Short names the expression language expands (``{"tf": "tensorflow"}``); unique across frameworks.
    dtypes : tuple of str
        dtypes it has (the probe records the others as unavailable, naming the framework's lack).
    devices : tuple of str
        Devices its adapter can use when present.
    versions : tuple of str
        The default version matrix (newest patch of each minor line that installs for Python 3.11 on
        Linux x86-64), oldest first; the last is the newest release.
    requirements : callable
        ``version`` → pip requirement strings for one probe environment.
    max_python : dict
        Release → the newest CPython (major, minor) it has wheels for; a release not listed has wheels for
        every Python the project supports.
    min_python : dict
        Release → the oldest CPython (major, minor) it installs on (``Requires-Python``), for a release that
        drops the project's oldest (3.11): JAX from 0.11, PyTensor from 3.1.
    tested : str or None
        The release the test suite installs (None: the tests skip its adapter tests, saying so).
    import_first : bool
        Import it before the other frameworks when one process loads several (``kinkcheck check``, the tests):
        PaddlePaddle segfaults when imported after TensorFlow (``import tensorflow, paddle``; the other order works).
    test_alone : str or None
        Why its tested release cannot share the test virtualenv (a conflicting pin); then ``nox -s tests`` leaves
        it out and ``nox -s "framework_tests(<name>)"`` tests it in its own virtualenv.
    device_requirements : dict
        Device → version → what an environment on that device installs instead of ``requirements`` (None: the
        release has no build for it from a package registry); see :meth:`requirements_for`.
    rule : tuple of (str, str)
        Its documented rule at a kink and where it is documented; an empty text means none is documented.
    documented : dict
        Dotted function name (or ``".method"`` for a method of an input) → one of
        :data:`DOCUMENTED_FAMILIES`: the per-function choices the rule names.
    exempt : tuple of tuple of str
        Public namespaces whose dotted path carries a word :mod:`kinkcheck.language.expr` refuses but that hold only array
        functions (``("tensorflow", "experimental", "numpy")``): only the segments of the exact prefix are exempt.
    pure_setters : frozenset of str
        Names of a refused kind that are pure functions here (PyTensor's ``set_subtensor`` builds a new symbolic
        variable, the subtensor written into a copy; it sets no state).
    """

    name: str
    display: str
    distribution: str
    adapter: str
    modes: tuple[str, ...]
    marker: tuple[str, str]
    aliases: Mapping[str, str] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float64", "float32", "float16", "bfloat16")
    devices: tuple[str, ...] = ("cpu",)
    versions: tuple[str, ...] = ()
    requirements: Callable[[str], list[str]] = field(default=lambda v: [], compare=False, repr=False)
    max_python: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    min_python: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    tested: str | None = None
    rule: tuple[str, str] = ("", "")
    documented: Mapping[str, str] = field(default_factory=dict)
    test_alone: str | None = None
    import_first: bool = False
    device_requirements: Mapping[str, Callable[[str], list[str] | None]] = field(default_factory=dict, compare=False,
                                                                               repr=False)
    exempt: tuple[tuple[str, ...], ...] = ()
    pure_setters: frozenset[str] = frozenset()

    def requirements_for(self, version: str, device: str = "cpu") -> list[str] | None:
        """What an environment of ``version`` on ``device`` installs: :attr:`requirements` on CPU and on a device
        whose builds are the default wheels (torch's Linux wheels on PyPI are CUDA builds); a device's own
        (:attr:`device_requirements`, e.g. ``jax[cuda12]``) otherwise; None when the release has no build for
        ``device`` or the framework no such device."""
        if device not in self.devices:
            return None
        own = self.device_requirements.get(device)
        return list(self.requirements(version)) if own is None else own(version)

    @property
    def newest(self) -> str | None:
        """The newest release of the matrix (None when it has none)."""
        return self.versions[-1] if self.versions else None


#: Where the framework folders are: ``frameworks/<name>/record.py`` holds each one's record (``RECORD``).
FOLDERS = Path(__file__).with_name("frameworks")


def read_record(path: Path) -> Framework:
    """The record of a framework folder (``RECORD`` of its ``record.py`` at ``path``), run from its file, not imported
    through the folder's package (whose ``__init__`` may import more): this module stays importable with the standard
    library alone. A record reads :class:`Framework` from this module. A record without releases of its own gets its
    ``matrix.toml`` line.

    Raises
    ------
    ValueError
        A record whose name is not its folder's.
    """
    spec = importlib.util.spec_from_file_location(f"kinkcheck.frameworks.{path.parent.name}.record", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    record: Framework = module.RECORD
    if record.name != path.parent.name:
        raise ValueError(f"{path}: the record names {record.name!r}, its folder {path.parent.name!r}")
    return record if record.versions else replace(record, versions=MATRIX.get(record.name, ()))


def _discover(folders: Path = FOLDERS) -> dict[str, Framework]:
    """Every framework folder's record (:func:`read_record`), in :data:`MATRIX`'s order, then any other by name."""
    found = {r.name: r for r in map(read_record, sorted(folders.glob("*/record.py")))}
    order = [*(n for n in MATRIX if n in found), *sorted(set(found) - set(MATRIX))]
    return {name: found[name] for name in order}


#: Framework name → record, report order (:data:`MATRIX`'s order, then any other folder's by name).
REGISTRY: dict[str, Framework] = _discover()


class _Names(Sequence[str]):
    """The registered names, report order, read from :data:`REGISTRY` on each access (a live tuple)."""

    def __getitem__(self, i: Any) -> Any:
        return tuple(REGISTRY)[i]

    def __len__(self) -> int:
        return len(REGISTRY)

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(REGISTRY))

    def __contains__(self, name: object) -> bool:
        return name in REGISTRY

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, (tuple, list, _Names)) else other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))


#: The registered framework names, report order (live: reads :data:`REGISTRY`).
FRAMEWORKS: Sequence[str] = _Names()

T = TypeVar("T")


class _View(Mapping[str, T]):
    """Framework name → ``get(record)``, read from :data:`REGISTRY` on each access."""

    def __init__(self, get: Callable[[Framework], T]) -> None:
        self._get = get

    def __getitem__(self, name: str) -> T:
        return self._get(REGISTRY[name])

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(REGISTRY))

    def __len__(self) -> int:
        return len(REGISTRY)

    def __eq__(self, other: object) -> bool:
        return dict(self) == (dict(other) if isinstance(other, Mapping) else other)

    def __repr__(self) -> str:
        return repr(dict(self))


def view(get: Callable[[Framework], T]) -> Mapping[str, T]:
    """A live mapping framework name → ``get(record)`` (``view(lambda f: f.display)``)."""
    return _View(get)


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


def aliases() -> dict[str, str]:
    """Every framework's expression aliases, alias → dotted path (``{"jnp": "jax.numpy", "tf": "tensorflow"}``)."""
    return {a: path for f in REGISTRY.values() for a, path in f.aliases.items()}


def register(record: Framework) -> None:
    """Add a framework (after the others in report order).

    Raises
    ------
    ValueError
        The name is taken, or an alias is another framework's name or alias.
    """
    if record.name in REGISTRY:
        raise ValueError(f"framework {record.name!r} is already registered")
    taken = set(REGISTRY) | set(aliases())
    clash = sorted((set(record.aliases) | {record.name}) & taken)
    if clash:
        raise ValueError(f"framework {record.name!r}: {', '.join(clash)} already names a framework or alias")
    REGISTRY[record.name] = record


@contextlib.contextmanager
def registered(record: Framework) -> Iterator[Framework]:
    """:func:`register` for the duration of a ``with`` block (tests)."""
    register(record)
    try:
        yield record
    finally:
        REGISTRY.pop(record.name, None)
