"""Policy conformance: does a program follow its own framework's documented rule at a kink?

Each framework's rule is its registry record's ``rule`` (text and source) and ``documented`` choices
(:mod:`kinkcheck.registry`: a framework-wide rule under ``"*"``, or per function: ``zero``, ``even``, ``first``,
``min-norm``); a framework that documents nothing is open everywhere at a kink. The rule is turned into a
prediction from the sympy oracle (:mod:`kinkcheck.oracles.symbolic`):
the set of gradient values the rule admits at the case's point. A measured value then **conforms** (it is
one of them, within the dtype tolerance of :func:`kinkcheck.oracles.classify.same_value`), **departs** (it is not),
or the rule leaves the value **open** (no documented choice for this program, the rule itself says
"arbitrary", the oracle did not judge the case, or ``f`` is not locally Lipschitz at a point of several
components, where the limits of the gradient depend on the path). Error and unavailable cells, and second-order cells (the rules are about gradients), get no
verdict; nor do float16/bfloat16 cells or cells whose input the dtype rounded (:data:`JUDGED_DTYPES`): in low
precision the function itself can change (hardtanh's bound 0.7 rounds onto the point in bfloat16), so the
float64 oracle no longer describes it.

Both frameworks state their rules for single operations, so only a program that is **one operation** on the
case's inputs and constants is judged (``torch.clamp(x, min=0)``, ``x.clamp(min=0)``, ``torch.maximum(x, y)``,
``x ** 0.5``); a composite (``torch.relu(-x) + x``, ``torch.maximum(x, torch.zeros_like(x))`` — a
two-argument maximum whose second argument is a tensor — or ``torch.sqrt(x * x)``) is open: each of its
operations may follow the rule while the composition does not give the rule's value for the whole function.

PyTorch
    One rule for every operator, in the autograd notes, section "Gradients for non-differentiable
    functions" (``docs/source/notes/autograd.rst``): 1. the gradient where f is differentiable; 2. where f
    is locally convex, the minimum-norm subgradient; 3. where locally concave, the minimum-norm
    supergradient; 4. where f is defined, the gradient "by continuity" (``inf`` possible, e.g. ``sqrt(0)``),
    any one where several values are possible; 5. where f is not defined, arbitrary. Local convexity is
    read off the one-sided (directional) derivatives: ``OracleResult.shape``. Step 4 admits each limiting
    gradient (the limits of the gradient of the pieces next to the point).
JAX
    No framework-wide rule. Documented per function: ``jax.nn.relu`` takes ``∇relu(0) = 0`` and
    ``jax.nn.relu6`` ``∇relu6(0) = ∇relu6(6) = 0`` (docstrings in ``jax/_src/nn/functions.py``); the
    elementwise ``lax.max``/``lax.min`` (so ``jnp.maximum``, ``jnp.minimum``, ``jnp.clip``) share the
    derivative evenly between tied arguments (``_balanced_eq`` in the ``max_p``/``min_p`` JVPs,
    ``jax/_src/lax/lax.py``), and the reductions ``jnp.max``/``jnp.min`` (``reduce_max``/``reduce_min``)
    share it evenly among tied entries (``_reduce_chooser_jvp_rule``, same file). These apply to a program
    that is one call of such a function on the inputs; anywhere else at a kink the value is open. Where f is
    differentiable the rule is the derivative (``jax.grad`` evaluates the gradient).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from kinkcheck.language import expr as ex
from kinkcheck import registry
from kinkcheck.oracles.classify import OracleNumbers, same_value
from kinkcheck.vocabulary import DIFFERENTIABLE, JUMP, KINK, NOT_JUDGED, UNDEFINED

__all__ = ["JUDGED_DTYPES", "RULES", "VERDICTS", "Prediction", "Rule", "predict", "single_operation", "verdict"]

#: Verdicts, in the order the report counts them.
VERDICTS: tuple[str, ...] = ("conforms", "departs", "open")
#: dtypes whose cells are judged (the catalog's points and constants hold in them).
JUDGED_DTYPES: tuple[str, ...] = ("float64", "float32")


@dataclass(frozen=True)
class Rule:
    """A framework's documented rule, as shown in the report's Conformance section."""

    framework: str
    text: str
    source: str


class _Rules(Mapping[str, Rule]):
    """Framework → its :class:`Rule`, read from the registry (``Framework.rule``) on each access; a framework
    that documents no rule reads "no documented rule at a kink"."""

    def __getitem__(self, name: str) -> Rule:
        text, source = registry.framework(name).rule if name in registry.REGISTRY else ("", "")
        if name not in registry.REGISTRY:
            raise KeyError(name)
        return Rule(name, text or "no documented rule at a kink: every value at a kink is open", source or "—")

    def __iter__(self) -> Iterator[str]:
        return iter(registry.FRAMEWORKS)

    def __len__(self) -> int:
        return len(registry.REGISTRY)


#: Framework → its documented rule (:attr:`kinkcheck.registry.Framework.rule`).
RULES: Mapping[str, Rule] = _Rules()


@dataclass(frozen=True)
class Prediction:
    """What a framework's rule admits at a case's point.

    Attributes
    ----------
    step : str
        The part of the rule that applies, e.g. ``"2. minimum-norm subgradient (locally convex)"``.
    values : tuple of tuple of float
        The admitted gradients, flat in the case's component order; empty when the rule leaves it open.
    """

    step: str
    values: tuple[tuple[float, ...], ...]

    @property
    def open(self) -> bool:
        return not self.values


def _simple_arg(node: ex.Node) -> bool:
    if isinstance(node, (ex.Input, ex.Const)):
        return True
    if isinstance(node, ex.Unary):
        return isinstance(node.operand, ex.Const)
    if isinstance(node, ex.Seq):
        return all(_simple_arg(i) for i in node.items)
    return False


def single_operation(tree: ex.Node) -> bool:
    """One call (function or method of an input) or one arithmetic operator on inputs and constants."""
    if isinstance(tree, ex.Call):
        func_ok = isinstance(tree.func, ex.Name) or (isinstance(tree.func, ex.Attr) and
                                                      isinstance(tree.func.value, ex.Input))
        return func_ok and all(_simple_arg(a) for a in tree.args) and all(_simple_arg(v) for _, v in tree.kwargs)
    if isinstance(tree, ex.BinOp):
        return _simple_arg(tree.left) and _simple_arg(tree.right)
    return False


def _family(tree: ex.Node, documented: Mapping[str, str]) -> str | None:
    """The documented family (:data:`kinkcheck.registry.DOCUMENTED_FAMILIES`) of a program that is one call of a
    documented function (or a method of an input, key ``".max"``) on inputs and constants; else None."""
    if "*" in documented:  # a framework-wide rule
        return documented["*"]
    if not isinstance(tree, ex.Call) or not all(_simple_arg(a) for a in tree.args) or \
            not all(_simple_arg(v) for _, v in tree.kwargs):
        return None
    if isinstance(tree.func, ex.Name):
        return documented.get(tree.func.dotted)
    if isinstance(tree.func, ex.Attr) and isinstance(tree.func.value, ex.Input) and not tree.args:
        return documented.get("." + tree.func.name)
    return None


def predict(framework: str, tree: ex.Node, oracle: OracleNumbers) -> Prediction:
    """The values ``framework``'s documented rule admits for the program ``tree`` at the oracle's point.

    Parameters
    ----------
    framework : str
        ``"torch"`` or ``"jax"``; any other framework has no rule here (open).
    tree : kinkcheck.language.expr.Node
        The parsed program (``Program.tree``); PyTorch's rule does not depend on it, JAX's does.
    oracle : OracleNumbers
        The first-order sympy oracle of the case.

    Returns
    -------
    Prediction
        Float vectors in the oracle's component order (``inf`` where the rule gives an infinite value).
        Open (no values) when the oracle did not judge the case (its ``reason`` is the step), and for PyTorch
        at a point of several components where ``f`` is not locally Lipschitz (``atan2`` at the origin): the
        limits of the gradient there depend on the path, so step 4 admits no finite list of values. With one
        component the one-sided limits are the whole story and step 4 admits them (``sqrt`` at 0: ``inf``,
        the autograd notes' own example).
    """
    if oracle.kind == NOT_JUDGED:
        return Prediction(oracle.reason or "not judged: the oracle could not decide this case", ())
    if not single_operation(tree):
        return Prediction("a composite program: the documented rules are stated for single operations", ())
    if oracle.kind == DIFFERENTIABLE and oracle.derivative is not None:
        return Prediction("1. the gradient (f is differentiable)", (oracle.derivative,))
    rec = registry.REGISTRY.get(framework)
    family = _family(tree, rec.documented) if rec is not None else None
    if family == "min-norm":
        return _predict_min_norm(oracle)
    if family is None:
        return Prediction(f"no documented rule for {framework}" if rec is None or not rec.documented
                          else "no documented rule for this program at a kink", ())
    return _predict_family(family, tree, oracle)


def _predict_min_norm(o: OracleNumbers) -> Prediction:
    if o.kind == UNDEFINED:
        return Prediction("5. f is not defined near the point: arbitrary", ())
    if o.kind == KINK and o.clarke is not None and o.min_norm is not None:
        if o.shape == "convex":
            return Prediction("2. minimum-norm subgradient (locally convex)", (o.min_norm,))
        if o.shape == "concave":
            return Prediction("3. minimum-norm supergradient (locally concave)", (o.min_norm,))
    if o.lipschitz is False and len(o.components) > 1:
        return Prediction("4. by continuity: f is not locally Lipschitz here and the limits of its gradient depend "
                          "on the path of approach (the oracle samples some paths only): open", ())
    grads = tuple(g for g in o.limiting_gradients if g is not None)
    if not grads:
        return Prediction("4. by continuity: no limiting gradient to continue", ())
    why = {JUMP: "f jumps", KINK: "neither locally convex nor concave" if o.clarke is not None
           else "an infinite one-sided derivative or the edge of the domain"}[o.kind]
    return Prediction(f"4. by continuity ({why}): one of the limiting gradients", grads)


def _predict_family(family: str, tree: ex.Node, o: OracleNumbers) -> Prediction:
    n = len(o.components)
    if family == "zero" and o.kind == KINK and n == 1:
        return Prediction("documented: the derivative at the kink is 0 (relu'(0) = 0)", ((0.0,),))
    # one call of max/min on inputs and constants: its only kinks are ties
    if family == "even" and o.kind == KINK and o.midpoint is not None:
        return Prediction("documented: the derivative is shared evenly among tied arguments", (o.midpoint,))
    if family == "first" and o.kind == KINK and isinstance(tree, ex.Call) and tree.args and \
            isinstance(tree.args[0], ex.Input):
        # the tie goes to the first argument: the limiting gradient (the gradient of one active piece) that
        # gives the first argument's components the most weight, when exactly one does
        name = tree.args[0].name
        mine = [i for i, c in enumerate(o.components) if c == name or c.startswith(name + "[")]
        grads = [g for g in o.limiting_gradients if g is not None]
        weights = [sum(g[i] for i in mine) for g in grads]
        if mine and grads and weights.count(max(weights)) == 1:
            return Prediction("documented: a tie goes to the first argument", (grads[weights.index(max(weights))],))
    return Prediction("no documented rule for this program at a kink", ())


def verdict(prediction: Prediction, flat: Sequence[float] | None, dtype: str) -> str | None:
    """``"conforms"``, ``"departs"`` or ``"open"`` for a measured gradient; None when there is no value."""
    if flat is None:
        return None
    if prediction.open:
        return "open"
    return "conforms" if any(same_value(flat, list(v), dtype) for v in prediction.values) else "departs"
