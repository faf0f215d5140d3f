"""MLX's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.migrate.snippet`)."""

from __future__ import annotations


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """An ``mlx.core.custom_function`` with a ``vjp`` and a ``jvp``."""
    # mlx.core.custom_function with a vjp and a jvp (python/src/transforms.cpp); a one-input function's
    # transforms get the array itself, not a tuple
    return (
        "import mlx.core\nimport mlx.nn\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        "@mlx.core.custom_function\n"
        f"def f({name}):\n    return _target({name})\n\n\n"
        "# the target's own derivative, taken off the kink: there it is replaced, and an inf or NaN\n"
        "# evaluated there would reach the product through the unselected branch of the where\n"
        "@f.vjp\n"
        f"def _f_vjp({name}, cotangent, output):\n"
        f"    at_kink = {name} == {p}\n"
        f"    _, (d,) = mlx.core.vjp(_target, [mlx.core.where(at_kink, {p} + 1.0, {name})], [cotangent])\n"
        f"{comment}"
        f"    return mlx.core.where(at_kink, {v} * cotangent, d)\n\n\n"
        "@f.jvp\n"
        f"def _f_jvp({name}, tangent):\n"
        f"    at_kink = {name} == {p}\n"
        f"    _, (d,) = mlx.core.jvp(_target, [mlx.core.where(at_kink, {p} + 1.0, {name})], [tangent])\n"
        f"    return mlx.core.where(at_kink, {v} * tangent, d)\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """The same of two inputs."""
    return (
        "import mlx.core\nimport mlx.nn\n\n\n" + head +
        "@mlx.core.custom_function\n"
        f"def f({x}, {y}):\n    return _target({x}, {y})\n\n\n"
        + why +
        "@f.vjp\n"
        "def _f_vjp(primals, cotangent, output):\n"
        f"    {x}, {y} = primals\n"
        f"    tie = {x} == {y}\n"
        f"    _, (da, db) = mlx.core.vjp(_target, [mlx.core.where(tie, {x} + 1.0, {x}), {y}], [cotangent])\n"
        f"{comment}"
        f"    return mlx.core.where(tie, {vx} * cotangent, da), mlx.core.where(tie, {vy} * cotangent, db)\n\n\n"
        "@f.jvp\n"
        "def _f_jvp(primals, tangents):\n"
        f"    ({x}, {y}), (t{x}, t{y}) = primals, tangents\n"
        f"    tie = {x} == {y}\n"
        f"    _, (d,) = mlx.core.jvp(_target, [mlx.core.where(tie, {x} + 1.0, {x}), {y}], [t{x}, t{y}])\n"
        f"    return mlx.core.where(tie, {vx} * t{x} + {vy} * t{y}, d)\n"
    )
