"""The fake framework's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): a function on dual numbers that replaces the tangent at the kink."""

#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import fakefw


def _target($name):
    return $target


def f($name):
    y = _target($name)
    if $name.value == $p:
        # $note
        return fakefw.Dual(y.value, $v * $name.tangent)
    return y
"""

#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import fakefw


def _target($x, $y):
    return $target


def f($x, $y):
    out = _target($x, $y)
    if $x.value == $y.value:
        # $note
        return fakefw.Dual(out.value, $vx * $x.tangent + $vy * $y.tangent)
    return out
"""
