"""HIPS autograd's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): an ``autograd.extend.primitive`` with ``defvjp`` (reverse) and ``defjvp`` (forward)."""

# autograd.extend.primitive + defvjp (reverse) and defjvp (forward): autograd/extend.py
#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import autograd
import autograd.numpy
from autograd.extend import defjvp, defvjp, primitive


def _target($name):
    return $target


@primitive
def f($name):
    return _target($name)


def _derivative($name):
    # the target's own derivative, taken off the kink: there it is replaced, and an inf or NaN
    # evaluated there would reach the product through the unselected branch of the where
    at_kink = $name == $p
    d = autograd.elementwise_grad(_target)(autograd.numpy.where(at_kink, $p + 1.0, $name))
    # $note
    return autograd.numpy.where(at_kink, $v, d)


defvjp(f, lambda ans, $name: lambda g: g * _derivative($name))
defjvp(f, lambda g, ans, $name: g * _derivative($name))
"""

#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import autograd
import autograd.numpy
from autograd.extend import defjvp, defvjp, primitive


def _target($x, $y):
    return $target


@primitive
def f($x, $y):
    return _target($x, $y)


def _derivatives($x, $y):
    tie = $x == $y
    # the target's own derivative, taken with $x moved off the tie: there it is replaced, and an inf or
    # NaN evaluated there would reach the result through the unselected branch of the where
    a = autograd.numpy.where(tie, $x + 1.0, $x)
    da = autograd.elementwise_grad(_target, 0)(a, $y)
    db = autograd.elementwise_grad(_target, 1)(a, $y)
    # $note
    return autograd.numpy.where(tie, $vx, da), autograd.numpy.where(tie, $vy, db)


defvjp(f, lambda ans, $x, $y: lambda g: g * _derivatives($x, $y)[0],
       lambda ans, $x, $y: lambda g: g * _derivatives($x, $y)[1])
defjvp(f, lambda g, ans, $x, $y: g * _derivatives($x, $y)[0],
       lambda g, ans, $x, $y: g * _derivatives($x, $y)[1])
"""
