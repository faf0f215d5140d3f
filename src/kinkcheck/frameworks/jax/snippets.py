"""JAX's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.migrate.snippet`)."""

from __future__ import annotations

from textwrap import indent as _pad


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """A ``jax.custom_jvp``."""
    return (
        "import jax\nimport jax.numpy\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        "@jax.custom_jvp\n"
        f"def f({name}):\n    return _target({name})\n\n\n"
        "@f.defjvp\n"
        "def _f_jvp(primals, tangents):\n"
        f"    ({name},), (t,) = primals, tangents\n"
        f"    at_kink = {name} == {p}\n"
        "    # the target's own derivative, taken off the kink and along a tangent selected to 0 there: it is\n"
        "    # replaced at the kink, and an inf or NaN of it (at the shifted point, or the target's own where)\n"
        "    # would otherwise reach jax.grad through the unselected branch (inf * 0)\n"
        f"    _, dy = jax.jvp(_target, (jax.numpy.where(at_kink, {p} + 1.0, {name}),),\n"
        "                    (jax.numpy.where(at_kink, jax.numpy.zeros_like(t), t),))\n"
        f"{comment}"
        f"    return _target({name}), jax.numpy.where(at_kink, {v} * t, dy)\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """A ``jax.custom_jvp`` of two inputs."""
    return (
        "import jax\nimport jax.numpy\n\n\n" + head +
        "@jax.custom_jvp\n"
        f"def f({x}, {y}):\n    return _target({x}, {y})\n\n\n"
        "@f.defjvp\n"
        "def _f_jvp(primals, tangents):\n"
        f"    ({x}, {y}), (t{x}, t{y}) = primals, tangents\n"
        f"    tie = {x} == {y}\n"
        + _pad(why, " " * 4) +
        f"    _, d = jax.jvp(_target, (jax.numpy.where(tie, {x} + 1.0, {x}), {y}),\n"
        f"                   (jax.numpy.where(tie, jax.numpy.zeros_like(t{x}), t{x}),\n"
        f"                    jax.numpy.where(tie, jax.numpy.zeros_like(t{y}), t{y})))\n"
        f"{comment}"
        f"    return _target({x}, {y}), jax.numpy.where(tie, {vx} * t{x} + {vy} * t{y}, d)\n"
    )
