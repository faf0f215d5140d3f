"""TensorFlow's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): a ``tf.custom_gradient`` (reverse mode, eager and ``tf.function``)."""

# tf.custom_gradient (tensorflow/python/ops/custom_gradient.py): the target's own gradient is taken
# off the kink with a tape; ZERO answers an op without a gradient (tf.floor) with 0, not None
#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import tensorflow


def _target($name):
    return $target


@tensorflow.custom_gradient
def f($name):
    def grad(upstream):
        at_kink = tensorflow.equal($name, $p)
        # off the kink: there it is replaced, and an inf or NaN evaluated there would reach the
        # product through the unselected branch of the where
        off = tensorflow.where(at_kink, tensorflow.ones_like($name) * ($p + 1.0), $name)
        with tensorflow.GradientTape() as tape:
            tape.watch(off)
            y = _target(off)
        d = tape.gradient(y, off, output_gradients=upstream,
                          unconnected_gradients=tensorflow.UnconnectedGradients.ZERO)
        # $note
        return tensorflow.where(at_kink, upstream * $v, d)

    return _target($name), grad
"""

# tf.custom_gradient with two inputs: grad returns one gradient per input
#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import tensorflow


def _target($x, $y):
    return $target


@tensorflow.custom_gradient
def f($x, $y):
    def grad(upstream):
        tie = tensorflow.equal($x, $y)
        # the target's own derivative, taken with $x moved off the tie: there it is replaced, and an inf or
        # NaN evaluated there would reach the result through the unselected branch of the where
        a, b = tensorflow.where(tie, $x + 1.0, $x), tensorflow.identity($y)
        with tensorflow.GradientTape() as tape:
            tape.watch([a, b])
            out = _target(a, b)
        da, db = tape.gradient(out, [a, b], output_gradients=upstream,
                               unconnected_gradients=tensorflow.UnconnectedGradients.ZERO)
        # $note
        return tensorflow.where(tie, upstream * $vx, da), tensorflow.where(tie, upstream * $vy, db)

    return _target($x, $y), grad
"""
