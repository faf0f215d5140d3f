"""Run the catalog in the installed framework and build a shard.

Each program is evaluated at its case's point for every requested dtype and mode, each in its own
``try``: a program that raises becomes an ``error`` cell with the message, a name missing in this
version an ``unavailable`` cell; neither loses the rest of the shard. Activation programs (cases with an
``activation``) are also run end to end on P0's two-layer network (``networks``), for the NumPy
backprop cross-check in the report.
"""

from __future__ import annotations

import datetime as dt
import platform
from collections.abc import Callable, Sequence
from typing import Any

from kinkcheck import __version__
from kinkcheck.catalog import Catalog, load_catalog
from kinkcheck.frameworks import Adapter, FrameworkUnavailable, Unavailable, encode, get_adapter
from kinkcheck.frameworks.base import short_error
from kinkcheck.oracles.backprop import P0

__all__ = ["DEFAULT_DTYPES", "environment", "probe"]

#: dtypes of the core probe (issue 4 adds float16 and bfloat16).
DEFAULT_DTYPES: tuple[str, ...] = ("float64", "float32")


def _public_version(version: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).public
    except InvalidVersion:
        return version


def environment(adapter: Adapter, device: str, catalog: Catalog) -> dict[str, Any]:
    """Provenance of a shard: ``id`` is ``"<framework>-<public version>-<device>"``."""
    version = _public_version(adapter.version)
    env = {
        "id": f"{adapter.name}-{version}-{device}",
        "framework": adapter.name,
        "framework_version": version,
        "framework_build": adapter.version,
        "device": device,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "measured_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "kinkcheck_version": __version__,
        "catalog_hash": catalog.hash,
        "settings": adapter.settings(),
    }
    return env


def probe(
    framework: str,
    device: str = "cpu",
    dtypes: Sequence[str] = DEFAULT_DTYPES,
    modes: Sequence[str] = ("reverse",),
    catalog: Catalog | None = None,
    on_step: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Probe the whole catalog for ``framework`` on ``device``; return a shard (see ``schemas/shard.v1.json``).

    Parameters
    ----------
    framework : {"torch", "jax"}
    device : {"cpu", "cuda"}
    dtypes, modes : sequences of str
        See :data:`kinkcheck.frameworks.DTYPES` and :data:`kinkcheck.frameworks.MODES`.
    on_step : callable, optional
        Called with a short description before each program (progress display).

    Raises
    ------
    FrameworkUnavailable
        The framework is not installed, or ``device`` is not present (``"not measured: no CUDA device"``).
    """
    catalog = catalog or load_catalog()
    adapter = get_adapter(framework)
    if device not in adapter.devices():
        raise FrameworkUnavailable(f"not measured: no {device} device for {framework}")
    observations: list[dict[str, Any]] = []
    networks: list[dict[str, Any]] = []
    for case, program in catalog.programs(framework):
        if on_step:
            on_step(f"{case.id}  {program.id}")
        for mode in dict.fromkeys([*modes, *case.modes]):
            for dtype in dtypes:
                status, value, error = "ok", None, None
                try:
                    value = {k: encode(v) for k, v in adapter.gradient(program.tree, case.at, dtype, device, mode).items()}
                except Unavailable as err:
                    status, error = "unavailable", str(err)
                except Exception as err:  # noqa: BLE001 - any framework failure is an observation
                    status, error = "error", short_error(err)
                observations.append(
                    {"case": case.id, "program": program.id, "mode": mode, "dtype": dtype,
                     "status": status, "value": value, "error": error}
                )
        if case.activation and len(case.at) == 1:
            (name,) = case.at
            for dtype in dtypes:
                status, w1, w2, error = "ok", None, None, None
                try:
                    g1, g2 = adapter.network_grads(program.tree, name, P0, dtype, device)
                    w1, w2 = encode(g1), encode(g2)
                except Unavailable as err:
                    status, error = "unavailable", str(err)
                except Exception as err:  # noqa: BLE001
                    status, error = "error", short_error(err)
                networks.append({"case": case.id, "program": program.id, "dtype": dtype, "status": status,
                                 "W1": w1, "W2": w2, "error": error})
    return {
        "schema": "kinkcheck/shard/v1",
        "environment": environment(adapter, device, catalog),
        "observations": observations,
        "networks": networks,
    }
