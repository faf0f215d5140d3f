"""Kink hits in real computation: how often a network's forward pass lands exactly on a kink.

A kink hit is an element of an operation's input that sits exactly where the operation has no derivative, so
that backpropagation takes the framework's convention there: a pre-activation exactly 0 under ``relu``, an
input exactly at a ``clamp`` bound, a tie of ``maximum(a, b)``, a tied maximum of a ``max`` reduction or of a
max-pool window. Bertoin, Bolte, Gerchinovitz and Pauwels ("Numerical influence of ReLU'(0) on
backpropagation", NeurIPS 2021; code: github.com/deel-ai/relu-prime) showed such hits are common in low
precision.

The counters look at a model without editing it, each in its framework's folder (this module holds what they
share: :class:`Site` and :func:`merge_sites`):

* PyTorch: :class:`kinkcheck.frameworks.torch.kinkhits.TorchHitCounter`, a ``torch.overrides.TorchFunctionMode`` that sees every call of a torch
  function, functional or method (``F.relu``, ``x.clamp(min=0)``, the ``F.relu`` an ``nn.ReLU`` module calls) —
  forward hooks would miss the functional calls inside a ``forward``. Inside the mode's handler the mode is off,
  so only the outermost (public) call is counted, not the aten calls it makes.
* JAX: :func:`kinkcheck.frameworks.jax.kinkhits.jax_hits`, an interpreter of the function's jaxpr (``jax.make_jaxpr``) that evaluates each
  equation with ``primitive.bind`` and counts at the kinked primitives (``max``, ``min``, ``abs``, ``clamp``,
  ``reduce_max``, ``reduce_min``, ``argmax``, ``argmin``), naming each hit by the innermost named call around it
  (``jax.nn.relu`` is a ``custom_jvp_call`` named ``relu`` around ``max x 0.0``).

Each call site is a :class:`Site`: the public name called (``torch.nn.functional.relu``, ``jax.nn.relu``), the
kink it checks (``x = 0``, ``tie``), the elements looked at and the hits among them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["CensusCell", "CensusScale", "Site", "ask_site", "merge_sites"]


@dataclass
class Site:
    """One kinked call of a forward pass (``index``: its order among the kinked calls, the "layer"), or the sum
    of such calls over passes (:func:`merge_sites`).

    ``elements`` counts what was looked at: input elements for an elementwise operation, reduced slices for a
    reduction, windows for a max-pool; ``hits`` those exactly at the kink; ``calls`` the calls summed.
    ``inspected`` is False (with ``why``) where the counter could not look (a max-pool with ``ceil_mode``).
    ``call`` is where the user's code made the call (``model.py:12``, the first frame outside the framework and
    kinkcheck); ``question`` and ``at`` the program and point that ask this call's convention (``kinkcheck ask``:
    the call as spelled, with its scalar arguments, at the kink it checks), or ``question`` empty and ``unasked``
    saying why there is none (a tensor argument, a random function)."""

    index: int
    program: str
    kink: str
    elements: int = 0
    hits: int = 0
    calls: int = 1
    dtype: str = ""
    inspected: bool = True
    why: str = ""
    call: str = ""
    question: str = ""
    at: str = ""
    unasked: str = ""

    def key(self) -> tuple[int, str, str, str]:
        return (self.index, self.program, self.kink, self.dtype)


def merge_sites(passes: Iterable[Sequence[Site]]) -> list[Site]:
    """The sites of several forward passes summed by (index, program, kink, dtype), in first-seen order. A site's
    question is that of the first pass that hit its kink (the point the model reached), else the first pass's."""
    out: dict[tuple[int, str, str, str], Site] = {}
    for sites in passes:
        for s in sites:
            have = out.get(s.key())
            if have is None:
                out[s.key()] = Site(s.index, s.program, s.kink, s.elements, s.hits, s.calls, s.dtype, s.inspected,
                                    s.why, s.call, s.question, s.at, s.unasked)
            else:
                if have.hits == 0 and s.hits > 0:  # the first pass on the kink says where the model reached it
                    have.question, have.at, have.unasked = s.question, s.at, s.unasked
                have.elements += s.elements
                have.hits += s.hits
                have.calls += s.calls
                have.inspected = have.inspected and s.inspected
                have.why = have.why or s.why
    return list(out.values())


def ask_site(site: Site, question: Callable[[], tuple[str, str] | str]) -> None:
    """Set the site's question and point from ``question()`` (a counter's question writer), or ``unasked`` to why
    there is none; a writer that fails is a reason too, never an error in the user's model."""
    try:
        asked = question()
    except Exception as err:  # noqa: BLE001 - an argument form the writer does not know
        asked = f"not asked: {type(err).__name__}: {' '.join(str(err).split())[:160]}"
    if isinstance(asked, str):
        site.unasked = asked
    else:
        site.question, site.at = asked


# --------------------------------------------------------------------------- the census of a trained network

@dataclass(frozen=True)
class CensusScale:
    """How much the kink-hit census measures (``kinkcheck census``, :mod:`kinkcheck.answers.hitcensus`). Defaults: 5 depths × 4 dtypes × 100 initialisations of width 128, batch 256 (7
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


@dataclass
class CensusCell:
    """One (dtype, depth) of the kink-hit census's measurements 1 and 2 (a framework's ``hitcensus.bifurcation``)."""

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

