"""The fake framework's code for ``kinkcheck migrate``: a function on dual numbers that returns the chosen tangent
at the kink."""

from __future__ import annotations


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """``target`` with derivative ``v`` at ``name == p``: the dual number's tangent replaced there."""
    return (
        "import fakefw\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        f"def f({name}):\n"
        f"    y = _target({name})\n"
        f"    if {name}.value == {p}:\n"
        f"{comment.replace('    #', '        #')}"
        f"        return fakefw.Dual(y.value, {v} * {name}.tangent)\n"
        "    return y\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """``target`` with derivatives ``vx``, ``vy`` wherever ``x == y``."""
    return (
        "import fakefw\n\n\n" + head +
        f"def f({x}, {y}):\n"
        f"    out = _target({x}, {y})\n"
        f"    if {x}.value == {y}.value:\n"
        f"{comment.replace('    #', '        #')}"
        f"        return fakefw.Dual(out.value, {vx} * {x}.tangent + {vy} * {y}.tangent)\n"
        "    return out\n"
    )
