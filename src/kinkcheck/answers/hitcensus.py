"""``kinkcheck census``: does the convention at a kink matter in training? Kink hits counted in real networks.

Three measurements on the CPU, the reference network a PyTorch MLP as in the paper (``framework="jax"``: the
same initialisations and minibatches in JAX under ``jax.jit`` for 1 and 2; each framework's network is its folder's
``hitcensus.py``, :mod:`kinkcheck.frameworks.torch.hitcensus`):

1. **Bifurcation by precision and depth** — the experiment of Bertoin, Bolte, Gerchinovitz and Pauwels
   ("Numerical influence of ReLU'(0) on backpropagation", NeurIPS 2021; deel-ai/relu-prime,
   ``notebooks/volume_estimation_by_architecture.ipynb``) at a scale that fits a 2-core machine: for each
   random initialisation (PyTorch's default, Kaiming-uniform) of an MLP ``64 → width → … → 10`` with ReLU, the
   minibatches of one pass over scikit-learn's digits (1,797 images of 8 × 8, shipped offline) are run without
   any update; the initialisation *differs* when, on some minibatch, the first layer's weight gradient of the
   cross-entropy is not exactly equal under ReLU'(0) = 0 and ReLU'(0) = 1 (the paper's test; it stops at the
   first such minibatch). The backward passes run only on a minibatch whose forward pass hit the kink (a
   pre-activation exactly 0): without a hit the two conventions give the same gradient bit for bit.
2. **The conventions per minibatch** — on the same minibatches, the first-layer gradient under ReLU'(0) ∈
   {0, ½, 1} and under the framework's own programs (``torch.relu(x)``, ``x.clamp(min=0)``,
   ``torch.maximum(x, torch.zeros_like(x))``, whose values at 0 the report measures): the fraction of
   minibatches where each differs from ReLU'(0) = 0, and the kink hits per layer (:class:`TorchHitCounter`).
3. **A short training run per convention** in float16 and bfloat16 (plain SGD): final loss and test accuracy.

:func:`run` measures; :func:`render_sites` shows the kink hits of a user's model (counted by
:func:`kinkcheck.probe.userhits.user_census`, which ``kinkcheck lock`` uses too) with the report's conventions there.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from kinkcheck.catalog import load_catalog
from kinkcheck.census import coverage, load_census
from kinkcheck.frameworks import census_network, kink_counter
from kinkcheck.kinkhits import CensusScale as Scale
from kinkcheck.kinkhits import Site
from kinkcheck.language import expr as ex
from kinkcheck.render.census import PAPER_PREACTIVATIONS, PRECISION, render_run
from kinkcheck.render.view import fmt_value

__all__ = ["PAPER", "PAPER_PREACTIVATIONS", "PAPER_SOURCE", "Scale", "render_run", "render_sites", "run"]

#: The paper's proportions (%) of 1,000 initialisations whose first-layer gradient differs between
#: ReLU'(0) = 0 and 1, MNIST MLP of width 256, batch 256, one epoch: by depth (hidden layers) and precision.
#: Exact counts / 10 from the repository's result file; at 64 bits the depth sweep never ran (the notebook
#: breaks before computing: None), its width sweep measured 0 at every width.
PAPER: dict[str, dict[int, float | None]] = {
    "16 bit": {1: 87.1, 2: 99.9, 3: 100.0, 5: 100.0, 6: 100.0},
    "32 bit": {1: 5.4, 2: 25.8, 3: 46.3, 5: 64.7, 6: 69.7},
    "64 bit": {1: None, 2: None, 3: None, 5: None, 6: None},
}
PAPER_SOURCE = ("deel-ai/relu-prime @ 6c359e0, paper_results/section_3/volume_estimation_by_number_of_layers_MNIST.csv "
                "(1,000 initialisations; 64 bit: not run in the depth sweep, 0 % at every width in "
                "volume_estimation_by_number_of_neurons_MNIST.csv)")

#: The dtypes of the measurement, and the paper's precision each stands beside.
DTYPES: dict[str, str] = PRECISION  # dtype -> the paper's precision


def run(scale: Scale, progress: Callable[[str, int], None] | None = None, framework: str = "torch"
        ) -> dict[str, Any]:
    """All three measurements at ``scale``; a JSON-ready record with its provenance (versions, machine, scale,
    seconds). ``progress(label, total)`` is called once per initialisation done (``total``: a cell's count).
    The reference network's data, initialisations and minibatches are PyTorch's
    (:mod:`kinkcheck.frameworks.torch.hitcensus`); ``framework="jax"`` runs measurements 1 and 2 in JAX on them
    (:mod:`kinkcheck.frameworks.jax.hitcensus`), no training run: each framework's ``hitcensus.py`` in its folder.

    Raises
    ------
    ImportError
        Without PyTorch or scikit-learn.
    ValueError
        A framework without a census network in its folder.
    RuntimeError, MemoryError
        An allocation the scale needs and the machine cannot make (torch's allocator says which).
    """
    reference, own = census_network("torch"), census_network(framework)
    if reference is None or own is None:
        raise ValueError(f"no kink-hit census network for {framework} (frameworks/{framework}/hitcensus.py)")
    import sklearn  # optional: the census's data (scikit-learn's digits)

    X, Y = reference.digits()
    t0 = time.perf_counter()
    cells = []
    measure = own.bifurcation
    for dtype in scale.dtypes:
        for depth in scale.depths:
            label = f"{dtype} depth {depth}"
            tick = (lambda lb=label: progress(lb, scale.inits)) if progress is not None else None
            cells.append(asdict(measure(scale, depth, dtype, X, Y, tick)))
    train = getattr(own, "train", None)  # measurement 3: PyTorch's
    runs = [train(scale, dtype, c, X, Y) for dtype in ("float16", "bfloat16") if dtype in scale.dtypes
            for c in ("relu'(0)=0", "relu'(0)=1")] if scale.train_epochs > 0 and train is not None else []
    return {
        "schema": "kinkcheck/kinkhits/v1",
        "environment": {"framework": framework, "framework_version": own.version(),
                        "device": "cpu", "python": platform.python_version(), "platform": platform.platform(),
                        "scikit_learn": sklearn.__version__, "threads": reference.threads()},
        "scale": asdict(scale),
        "data": "scikit-learn digits: 1,797 images of 8 × 8, pixel / 16; one pass = "
                f"{len(X) // scale.batch} minibatches of {scale.batch}",
        "cells": cells,
        "training": runs,
        "paper": {"source": PAPER_SOURCE, "proportions": {k: {str(d): v for d, v in row.items()}
                                                          for k, row in PAPER.items()}},
        "seconds": round(time.perf_counter() - t0, 1),
    }


# --------------------------------------------------------------------------- what the report says there


def _census_op(framework: str, program: str) -> Any:
    """The census operation a site's program names: ``torch.nn.functional.relu``, ``torch.Tensor.clamp``
    (``.clamp``); for JAX the named call around a primitive (``relu: max`` → ``jax.nn.relu``) or the primitive
    itself (``max`` → ``jax.lax.max``). None when the census has no such operation."""
    counter = kink_counter(framework)
    if counter is None:
        return None
    census = load_census(framework)
    for name in counter.census_names(program):
        try:
            return census.op(name)
        except KeyError:
            continue
    return None


def convention(framework: str, program: str, report: Any, dtype: str = "float32", version: str | None = None
               ) -> str:
    """What ``report`` (a :class:`kinkcheck.report.model.Report`) measured for the operation a site names:
    the first catalog case covering it (:func:`kinkcheck.census.coverage`), the program of that case calling it
    directly, and its reverse-mode value in ``dtype`` on the CPU (Linux x86-64) in release ``version`` (the one
    the model ran in) where the report has it, else the newest. A sentence saying why not where the census or
    the catalog has nothing."""
    op = _census_op(framework, program)
    if op is None:
        return "not in the census of kinked operations"
    catalog = load_catalog()
    cases = coverage(load_census(framework), catalog).covered.get(op.name, ())
    if not cases:
        return f"{op.name}: no catalog case covers it yet"
    for cid in cases:
        case = next(c for c in catalog if c.id == cid)
        for prog in case.programs:
            root = prog.tree.func if isinstance(prog.tree, ex.Call) else None
            calls = (isinstance(root, ex.Name) and root.dotted in op.spellings) or (
                isinstance(root, ex.Attr) and f".{root.name}" in op.spellings)
            if prog.framework != framework or not calls:
                continue
            envs = [e for e in report.environments if e.framework == framework and e.place == "cpu" and e.modes]
            envs.sort(key=lambda e: e.framework_version == version)  # the model's own release last: tried first
            for env in reversed(envs):  # then the newest
                ob = next((o for o in report.observations if o.environment == env.id and o.case == cid
                           and o.program == prog.id and o.mode == "reverse" and o.dtype == dtype), None)
                if ob is not None and ob.status == "ok":
                    return f"{cid}: {prog.id} → {fmt_value(ob.value)} ({ob.labels[0]}), {framework} " \
                           f"{env.framework_version} {dtype}"
            return f"{cid}: {prog.id}: not measured in {dtype} reverse mode"
    return f"{op.name}: covered by {', '.join(cases)}, but by no direct call"


def render_sites(framework: str, sites: Sequence[Site], report: Any | None, version: str | None = None,
                 mode: str = "") -> str:
    """The user census as a Markdown table: per kinked call site, its program, kink, hits / elements, and the
    report's convention there (:func:`convention`; "no report" without one). ``mode``: how the model ran."""
    lines = [f"Kink hits in the model's forward passes ({framework}{'; ' + mode if mode else ''}):", "",
             "| # | program | kink | dtype | hits | looked at | convention in the report |",
             "|---|---|---|---|---|---|---|"]
    for s in sites:
        seen = str(s.elements) if s.inspected else f"not inspected: {s.why}"
        conv = convention(framework, s.program, report, s.dtype if s.dtype in DTYPES else "float32", version) \
            if report is not None and s.inspected else ("no report" if report is None else "")
        lines.append(f"| {s.index} | `{s.program}` | {s.kink} | {s.dtype} | {s.hits} | {seen} | {conv} |")
    total = sum(s.hits for s in sites)
    lines += ["", f"{total} kink hit(s) in {len(sites)} kinked call site(s)."]
    return "\n".join(lines) + "\n"


