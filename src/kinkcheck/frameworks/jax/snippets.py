"""JAX's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): a ``jax.custom_jvp``."""

#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import jax
import jax.numpy


def _target($name):
    return $target


@jax.custom_jvp
def f($name):
    return _target($name)


@f.defjvp
def _f_jvp(primals, tangents):
    ($name,), (t,) = primals, tangents
    at_kink = $name == $p
    # the target's own derivative, taken off the kink and along a tangent selected to 0 there: it is
    # replaced at the kink, and an inf or NaN of it (at the shifted point, or the target's own where)
    # would otherwise reach jax.grad through the unselected branch (inf * 0)
    _, dy = jax.jvp(_target, (jax.numpy.where(at_kink, $p + 1.0, $name),),
                    (jax.numpy.where(at_kink, jax.numpy.zeros_like(t), t),))
    # $note
    return _target($name), jax.numpy.where(at_kink, $v * t, dy)
"""

#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import jax
import jax.numpy


def _target($x, $y):
    return $target


@jax.custom_jvp
def f($x, $y):
    return _target($x, $y)


@f.defjvp
def _f_jvp(primals, tangents):
    ($x, $y), (t$x, t$y) = primals, tangents
    tie = $x == $y
    # the target's own derivative, taken with $x moved off the tie: there it is replaced, and an inf or
    # NaN evaluated there would reach the result through the unselected branch of the where
    _, d = jax.jvp(_target, (jax.numpy.where(tie, $x + 1.0, $x), $y),
                   (jax.numpy.where(tie, jax.numpy.zeros_like(t$x), t$x),
                    jax.numpy.where(tie, jax.numpy.zeros_like(t$y), t$y)))
    # $note
    return _target($x, $y), jax.numpy.where(tie, $vx * t$x + $vy * t$y, d)
"""
