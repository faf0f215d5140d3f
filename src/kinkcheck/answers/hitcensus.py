"""``kinkcheck census``: does the convention at a kink matter in training? Kink hits counted in real networks.

Three measurements on the CPU, the reference network a PyTorch MLP as in the paper (``framework="jax"``: the
same initialisations and minibatches in JAX under ``jax.jit`` for 1 and 2, :func:`bifurcation_jax`):

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
from dataclasses import asdict, dataclass, field
from typing import Any

from kinkcheck.kinkhits import Site
from kinkcheck.render.census import PAPER_PREACTIVATIONS, PRECISION, render_run

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

#: The conventions of measurement 2: a ReLU'(0) value, or a PyTorch program (its value at 0 is torch's own).
CONVENTIONS: tuple[str, ...] = ("relu'(0)=0", "relu'(0)=0.5", "relu'(0)=1", "torch.relu(x)", "x.clamp(min=0)",
                                "torch.maximum(x, torch.zeros_like(x))")


@dataclass(frozen=True)
class Scale:
    """How much to measure. Defaults: 5 depths × 4 dtypes × 100 initialisations of width 128, batch 256 (7
    minibatches of digits per pass), about 2–4 minutes on 2 cores; the paper ran 1,000 initialisations of width
    256 over MNIST (235 minibatches of 784 inputs per pass)."""

    depths: tuple[int, ...] = (1, 2, 3, 4, 5)
    dtypes: tuple[str, ...] = ("float64", "float32", "float16", "bfloat16")
    inits: int = 100
    width: int = 128
    batch: int = 256
    passes: int = 1
    train_epochs: int = 30
    seed: int = 0


def _torch() -> Any:
    import torch

    return torch


def digits() -> tuple[Any, Any]:
    """scikit-learn's digits: ``X`` (1797 × 64, float64, pixel / 16 in [0, 1]) and ``y`` (1797, int64) tensors.

    Raises ImportError without scikit-learn (``pip install scikit-learn``)."""
    from sklearn.datasets import load_digits

    torch = _torch()
    d = load_digits()
    return torch.tensor(d.data / 16.0, dtype=torch.float64), torch.tensor(d.target, dtype=torch.int64)


def _relu_at0(s: float) -> Any:
    """ReLU whose derivative at 0 is ``s`` (a ``torch.autograd.Function``; the paper's ``ReLUAlpha``, with the
    incoming gradient multiplied in: its code sets the constant ``alpha`` there)."""
    torch = _torch()

    class ReLUAt0(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x.clamp_min(0)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * ((x > 0).to(g.dtype) + s * (x == 0).to(g.dtype))

    return ReLUAt0.apply


def _activation(convention: str) -> Callable[[Any], Any]:
    torch = _torch()
    if convention.startswith("relu'(0)="):
        return _relu_at0(float(convention.split("=", 1)[1]))
    return {"torch.relu(x)": torch.relu, "x.clamp(min=0)": lambda x: x.clamp(min=0),
            "torch.maximum(x, torch.zeros_like(x))": lambda x: torch.maximum(x, torch.zeros_like(x))}[convention]


def mlp(depth: int, width: int, dtype: str, seed: int) -> list[Any]:
    """The reference MLP's layers: ``Linear(64, width)``, ``depth - 1`` × ``Linear(width, width)``, then
    ``Linear(width, 10)``, PyTorch's default initialisation drawn from ``seed``, cast to ``dtype``."""
    torch = _torch()
    gen = torch.random.fork_rng()
    with gen:
        torch.manual_seed(seed)
        layers = [torch.nn.Linear(64 if i == 0 else width, width) for i in range(depth)] + [
            torch.nn.Linear(width, 10)]
    return [layer.to(getattr(torch, dtype)) for layer in layers]


def _forward(layers: Sequence[Any], x: Any, act: Callable[[Any], Any]) -> tuple[Any, list[int]]:
    """Logits and the kink hits (pre-activations exactly 0) of each hidden layer."""
    hits, h = [], x
    for layer in layers[:-1]:
        z = layer(h)
        hits.append(int((z == 0).sum()))
        h = act(z)
    return layers[-1](h), hits


def _first_grad(layers: Sequence[Any], x: Any, y: Any, act: Callable[[Any], Any]) -> Any:
    torch = _torch()
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    logits, _ = _forward(layers, x, act)
    torch.nn.functional.cross_entropy(logits.float(), y).backward()  # the loss in float32: float16 overflows
    return layers[0].weight.grad.detach().clone()


def _minibatches(n: int, batch: int, passes: int, seed: int) -> list[Any]:
    """Index tensors of ``passes`` shuffled passes over ``n`` samples, ``batch`` at a time (a partial last
    minibatch dropped, as the paper's loader with batch 256 over 60,000 does not have to)."""
    torch = _torch()
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(passes):
        perm = torch.randperm(n, generator=gen)
        out += [perm[i:i + batch] for i in range(0, n - batch + 1, batch)]
    return out


@dataclass
class Cell:
    """One (dtype, depth) of measurements 1 and 2."""

    dtype: str
    depth: int
    inits: int
    differ: int = 0
    minibatches: int = 0
    minibatches_with_hits: int = 0
    hits: list[int] = field(default_factory=list)  # per hidden layer, summed over inits and minibatches
    elements: list[int] = field(default_factory=list)
    convention_differs: dict[str, int] = field(default_factory=dict)  # minibatches where it differs from relu'(0)=0
    seconds: float = 0.0

    @property
    def fraction(self) -> float:
        return self.differ / self.inits if self.inits else 0.0

    def count_minibatch(self, hits: Sequence[int], rows: int, width: int) -> bool:
        """Add one minibatch's kink hits per hidden layer; whether any pre-activation was exactly 0 (without
        one every convention gives the same gradient, bit for bit, and :meth:`compare` is not needed)."""
        self.minibatches += 1
        for j, h in enumerate(hits):
            self.hits[j] += h
            self.elements[j] += rows * width
        self.minibatches_with_hits += any(hits)
        return any(hits)

    def compare(self, differs: dict[str, bool], found: bool) -> bool:
        """Count the conventions whose first-layer gradient differs from ReLU'(0) = 0 on one minibatch; the
        initialisation differs (counted once) from the first minibatch where ReLU'(0) = 1 does. Returns
        whether it differs by now."""
        for c, d in differs.items():
            self.convention_differs[c] += d
        if differs.get("relu'(0)=1") and not found:
            self.differ += 1
            return True
        return found


def bifurcation(scale: Scale, depth: int, dtype: str, X: Any, Y: Any,
                progress: Callable[[], None] | None = None) -> Cell:
    """Measurements 1 and 2 for one (dtype, depth): see the module docstring."""
    torch = _torch()
    t0 = time.perf_counter()
    cell = Cell(dtype, depth, scale.inits, hits=[0] * depth, elements=[0] * depth,
                convention_differs={c: 0 for c in CONVENTIONS[1:]})
    Xd = X.to(getattr(torch, dtype))
    ref = _activation(CONVENTIONS[0])
    acts = {c: _activation(c) for c in CONVENTIONS[1:]}
    for i in range(scale.inits):
        seed = scale.seed * 1_000_003 + i
        layers = mlp(depth, scale.width, dtype, seed)
        found = False
        for idx in _minibatches(len(X), scale.batch, scale.passes, seed):
            x, y = Xd[idx], Y[idx]
            with torch.no_grad():
                _, hits = _forward(layers, x, ref)
            if not cell.count_minibatch(hits, x.shape[0], scale.width):
                continue
            g0 = _first_grad(layers, x, y, ref)
            found = cell.compare({c: not torch.equal(g0, _first_grad(layers, x, y, act)) for c, act in acts.items()},
                                 found)
        if progress is not None:
            progress()
    cell.seconds = time.perf_counter() - t0
    return cell


#: The conventions of measurement 2 in JAX: a ReLU'(0) value (a ``jax.custom_jvp``), or a JAX program.
JAX_CONVENTIONS: tuple[str, ...] = ("relu'(0)=0", "relu'(0)=0.5", "relu'(0)=1", "jax.nn.relu(x)",
                                    "jax.numpy.maximum(x, 0.0)", "jax.numpy.clip(x, 0.0)")


def _jax_activation(convention: str) -> Callable[[Any], Any]:
    import jax
    import jax.numpy as jnp

    if convention.startswith("relu'(0)="):
        s = float(convention.split("=", 1)[1])

        @jax.custom_jvp
        def relu(x: Any) -> Any:
            return jnp.maximum(x, jnp.zeros_like(x))

        @relu.defjvp
        def _jvp(primals: Any, tangents: Any) -> Any:
            (x,), (t,) = primals, tangents
            d = jnp.where(x > 0, 1.0, jnp.where(x == 0, s, 0.0)).astype(x.dtype)
            return relu(x), t * d

        return relu
    return {"jax.nn.relu(x)": jax.nn.relu, "jax.numpy.maximum(x, 0.0)": lambda x: jnp.maximum(x, 0.0),
            "jax.numpy.clip(x, 0.0)": lambda x: jnp.clip(x, 0.0)}[convention]


def bifurcation_jax(scale: Scale, depth: int, dtype: str, X: Any, Y: Any,
                    progress: Callable[[], None] | None = None) -> Cell:
    """Measurements 1 and 2 in JAX (``jax.jit`` of the forward pass and of ``jax.grad``), on the same
    initialisations as :func:`bifurcation` (PyTorch's, converted) and the same minibatches; float64 with
    ``jax_enable_x64`` on, as kinkcheck's JAX adapter does."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from kinkcheck.frameworks.jax.adapter import _x64

    t0 = time.perf_counter()
    cell = Cell(dtype, depth, scale.inits, hits=[0] * depth, elements=[0] * depth,
                convention_differs={c: 0 for c in JAX_CONVENTIONS[1:]})
    with _x64(dtype == "float64"):
        dt = jnp.dtype(dtype)
        Xd = jnp.asarray(X.numpy(), dtype=dt)
        Yn = Y.numpy()

        def forward(params: Any, x: Any, act: Callable[[Any], Any]) -> tuple[Any, list[Any]]:
            hits, h = [], x
            for w, b in params[:-1]:
                z = h @ w.T + b
                hits.append(jnp.sum(z == 0))
                h = act(z)
            w, b = params[-1]
            return h @ w.T + b, hits

        def loss(params: Any, x: Any, y: Any, act: Callable[[Any], Any]) -> Any:
            logits = forward(params, x, act)[0].astype(jnp.float32)
            return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

        acts = {c: _jax_activation(c) for c in JAX_CONVENTIONS}
        count = jax.jit(lambda p, x: forward(p, x, acts[JAX_CONVENTIONS[0]])[1])
        grads = {c: jax.jit(lambda p, x, y, a=a: jax.grad(loss)(p, x, y, a)[0][0]) for c, a in acts.items()}
        for i in range(scale.inits):
            seed = scale.seed * 1_000_003 + i
            params = [(jnp.asarray(layer.weight.detach().double().numpy(), dtype=dt),
                       jnp.asarray(layer.bias.detach().double().numpy(), dtype=dt))
                      for layer in mlp(depth, scale.width, "float64", seed)]
            found = False
            for idx in _minibatches(len(X), scale.batch, scale.passes, seed):
                x, y = Xd[idx.numpy()], jnp.asarray(Yn[idx.numpy()])
                if not cell.count_minibatch([int(h) for h in count(params, x)], x.shape[0], scale.width):
                    continue
                g0 = np.asarray(grads[JAX_CONVENTIONS[0]](params, x, y))
                found = cell.compare({c: not np.array_equal(g0, np.asarray(grads[c](params, x, y)))
                                      for c in JAX_CONVENTIONS[1:]}, found)
            if progress is not None:
                progress()
    cell.seconds = time.perf_counter() - t0
    return cell


def train(scale: Scale, dtype: str, convention: str, X: Any, Y: Any, depth: int = 3) -> dict[str, Any]:
    """Measurement 3: plain SGD (learning rate 0.1) of the reference MLP in ``dtype`` with ``convention``,
    ``scale.train_epochs`` passes over 1,500 digits; the other 297 are the test set. Returns the final training
    loss (the last epoch's mean), test accuracy, and the kink hits met."""
    torch = _torch()
    dt = getattr(torch, dtype)
    layers = mlp(depth, scale.width, dtype, scale.seed)
    params = [p for layer in layers for p in layer.parameters()]
    opt = torch.optim.SGD(params, lr=0.1)
    act = _activation(convention)
    gen = torch.Generator().manual_seed(scale.seed)
    perm = torch.randperm(len(X), generator=gen)
    train_idx, test_idx = perm[:1500], perm[1500:]
    Xd = X.to(dt)
    losses: list[float] = []
    hits = 0
    for epoch in range(scale.train_epochs):
        order = train_idx[torch.randperm(len(train_idx), generator=gen)]
        losses = []
        for i in range(0, len(order) - 64 + 1, 64):
            b = order[i:i + 64]
            opt.zero_grad(set_to_none=True)
            logits, h = _forward(layers, Xd[b], act)
            hits += sum(h)
            loss = torch.nn.functional.cross_entropy(logits.float(), Y[b])
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
    with torch.no_grad():
        logits, _ = _forward(layers, Xd[test_idx], act)
        acc = float((logits.float().argmax(1) == Y[test_idx]).float().mean())
    return {"dtype": dtype, "convention": convention, "depth": depth, "epochs": scale.train_epochs,
            "final_loss": sum(losses) / len(losses) if losses else float("nan"), "test_accuracy": acc,
            "kink_hits": hits,
            "finite": all(v == v and abs(v) != float("inf") for v in losses)}


def run(scale: Scale, progress: Callable[[str, int], None] | None = None, framework: str = "torch"
        ) -> dict[str, Any]:
    """All three measurements at ``scale``; a JSON-ready record with its provenance (versions, machine, scale,
    seconds). ``progress(label, total)`` is called once per initialisation done (``total``: a cell's count).
    ``framework="jax"``: measurements 1 and 2 in JAX (:func:`bifurcation_jax`, the same initialisations and
    minibatches), no training run.

    Raises
    ------
    ImportError
        Without PyTorch or scikit-learn.
    RuntimeError, MemoryError
        An allocation the scale needs and the machine cannot make (torch's allocator says which).
    """
    torch = _torch()
    import sklearn

    X, Y = digits()
    t0 = time.perf_counter()
    cells = []
    measure = bifurcation if framework == "torch" else bifurcation_jax
    for dtype in scale.dtypes:
        for depth in scale.depths:
            label = f"{dtype} depth {depth}"
            tick = (lambda lb=label: progress(lb, scale.inits)) if progress is not None else None
            cells.append(asdict(measure(scale, depth, dtype, X, Y, tick)))
    runs = [train(scale, dtype, c, X, Y) for dtype in ("float16", "bfloat16") if dtype in scale.dtypes
            for c in ("relu'(0)=0", "relu'(0)=1")] if scale.train_epochs > 0 and framework == "torch" else []
    if framework == "torch":
        version = str(torch.__version__).split("+")[0]
    else:
        import jax

        version = jax.__version__
    return {
        "schema": "kinkcheck/kinkhits/v1",
        "environment": {"framework": framework, "framework_version": version,
                        "device": "cpu", "python": platform.python_version(), "platform": platform.platform(),
                        "scikit_learn": sklearn.__version__, "threads": torch.get_num_threads()},
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


#: The public JAX functions a kinked primitive met outside any named call usually comes from, in the order
#: they are tried against the census (``jnp.max`` binds ``reduce_max``).
_JAX_PUBLIC: dict[str, tuple[str, ...]] = {
    "max": ("jax.numpy.maximum", "jax.lax.max"), "min": ("jax.numpy.minimum", "jax.lax.min"),
    "abs": ("jax.numpy.abs", "jax.lax.abs"), "clamp": ("jax.lax.clamp", "jax.numpy.clip"),
    "reduce_max": ("jax.numpy.max", "jax.numpy.amax"), "reduce_min": ("jax.numpy.min", "jax.numpy.amin"),
    "argmax": ("jax.numpy.argmax",), "argmin": ("jax.numpy.argmin",),
}


def _census_op(framework: str, program: str) -> Any:
    """The census operation a site's program names: ``torch.nn.functional.relu``, ``torch.Tensor.clamp``
    (``.clamp``); for JAX the named call around a primitive (``relu: max`` → ``jax.nn.relu``) or the primitive
    itself (``max`` → ``jax.lax.max``). None when the census has no such operation."""
    from kinkcheck.census import load_census

    census = load_census(framework)
    if framework == "torch":
        wanted = [f".{program.rsplit('.', 1)[1]}"] if program.startswith("torch.Tensor.") else [program]
    else:
        call, _, prim = program.rpartition(": ")
        wanted = ([f"jax.nn.{call}", f"jax.numpy.{call}", f"jax.lax.{call}"] if call else []) + list(
            _JAX_PUBLIC.get(prim, (f"jax.lax.{prim}",)))
    for name in wanted:
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
    from kinkcheck.language import expr as ex
    from kinkcheck.catalog import load_catalog
    from kinkcheck.census import coverage, load_census
    from kinkcheck.render.view import fmt_value

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


