"""HIPS autograd's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.migrate.snippet`)."""

from __future__ import annotations

from textwrap import indent as _pad


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """An ``autograd.extend.primitive`` with ``defvjp`` and ``defjvp`` (autograd/extend.py)."""
    # autograd.extend.primitive + defvjp (reverse) and defjvp (forward): autograd/extend.py
    return (
        "import autograd\nimport autograd.numpy\nfrom autograd.extend import defjvp, defvjp, primitive\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        "@primitive\n"
        f"def f({name}):\n    return _target({name})\n\n\n"
        f"def _derivative({name}):\n"
        "    # the target's own derivative, taken off the kink: there it is replaced, and an inf or NaN\n"
        "    # evaluated there would reach the product through the unselected branch of the where\n"
        f"    at_kink = {name} == {p}\n"
        f"    d = autograd.elementwise_grad(_target)(autograd.numpy.where(at_kink, {p} + 1.0, {name}))\n"
        f"{comment}"
        f"    return autograd.numpy.where(at_kink, {v}, d)\n\n\n"
        f"defvjp(f, lambda ans, {name}: lambda g: g * _derivative({name}))\n"
        f"defjvp(f, lambda g, ans, {name}: g * _derivative({name}))\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """The same of two inputs."""
    return (
        "import autograd\nimport autograd.numpy\nfrom autograd.extend import defjvp, defvjp, primitive\n\n\n"
        + head +
        "@primitive\n"
        f"def f({x}, {y}):\n    return _target({x}, {y})\n\n\n"
        f"def _derivatives({x}, {y}):\n"
        f"    tie = {x} == {y}\n"
        + _pad(why, " " * 4) +
        f"    a = autograd.numpy.where(tie, {x} + 1.0, {x})\n"
        f"    da = autograd.elementwise_grad(_target, 0)(a, {y})\n"
        f"    db = autograd.elementwise_grad(_target, 1)(a, {y})\n"
        f"{comment}"
        f"    return autograd.numpy.where(tie, {vx}, da), autograd.numpy.where(tie, {vy}, db)\n\n\n"
        f"defvjp(f, lambda ans, {x}, {y}: lambda g: g * _derivatives({x}, {y})[0],\n"
        f"       lambda ans, {x}, {y}: lambda g: g * _derivatives({x}, {y})[1])\n"
        f"defjvp(f, lambda g, ans, {x}, {y}: g * _derivatives({x}, {y})[0],\n"
        f"       lambda g, ans, {x}, {y}: g * _derivatives({x}, {y})[1])\n"
    )
