"""MLX's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): an ``mlx.core.custom_function`` with a ``vjp`` and a ``jvp``."""

# mlx.core.custom_function with a vjp and a jvp (python/src/transforms.cpp); a one-input function's
# transforms get the array itself, not a tuple
#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import mlx.core
import mlx.nn


def _target($name):
    return $target


@mlx.core.custom_function
def f($name):
    return _target($name)


# the target's own derivative, taken off the kink: there it is replaced, and an inf or NaN
# evaluated there would reach the product through the unselected branch of the where
@f.vjp
def _f_vjp($name, cotangent, output):
    at_kink = $name == $p
    _, (d,) = mlx.core.vjp(_target, [mlx.core.where(at_kink, $p + 1.0, $name)], [cotangent])
    # $note
    return mlx.core.where(at_kink, $v * cotangent, d)


@f.jvp
def _f_jvp($name, tangent):
    at_kink = $name == $p
    _, (d,) = mlx.core.jvp(_target, [mlx.core.where(at_kink, $p + 1.0, $name)], [tangent])
    return mlx.core.where(at_kink, $v * tangent, d)
"""

#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import mlx.core
import mlx.nn


def _target($x, $y):
    return $target


@mlx.core.custom_function
def f($x, $y):
    return _target($x, $y)


# the target's own derivative, taken with $x moved off the tie: there it is replaced, and an inf or
# NaN evaluated there would reach the result through the unselected branch of the where
@f.vjp
def _f_vjp(primals, cotangent, output):
    $x, $y = primals
    tie = $x == $y
    _, (da, db) = mlx.core.vjp(_target, [mlx.core.where(tie, $x + 1.0, $x), $y], [cotangent])
    # $note
    return mlx.core.where(tie, $vx * cotangent, da), mlx.core.where(tie, $vy * cotangent, db)


@f.jvp
def _f_jvp(primals, tangents):
    ($x, $y), (t$x, t$y) = primals, tangents
    tie = $x == $y
    _, (d,) = mlx.core.jvp(_target, [mlx.core.where(tie, $x + 1.0, $x), $y], [t$x, t$y])
    return mlx.core.where(tie, $vx * t$x + $vy * t$y, d)
"""
