"""TensorFlow's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.migrate.snippet`)."""

from __future__ import annotations

from textwrap import indent as _pad


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """A ``tf.custom_gradient`` (reverse mode, eager and ``tf.function``)."""
    # tf.custom_gradient (tensorflow/python/ops/custom_gradient.py): the target's own gradient is taken
    # off the kink with a tape; ZERO answers an op without a gradient (tf.floor) with 0, not None
    return (
        "import tensorflow\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        "@tensorflow.custom_gradient\n"
        f"def f({name}):\n"
        f"    def grad(upstream):\n"
        f"        at_kink = tensorflow.equal({name}, {p})\n"
        "        # off the kink: there it is replaced, and an inf or NaN evaluated there would reach the\n"
        "        # product through the unselected branch of the where\n"
        f"        off = tensorflow.where(at_kink, tensorflow.ones_like({name}) * ({p} + 1.0), {name})\n"
        "        with tensorflow.GradientTape() as tape:\n"
        "            tape.watch(off)\n"
        "            y = _target(off)\n"
        "        d = tape.gradient(y, off, output_gradients=upstream,\n"
        "                          unconnected_gradients=tensorflow.UnconnectedGradients.ZERO)\n"
        f"{comment.replace('    #', '        #')}"
        f"        return tensorflow.where(at_kink, upstream * {v}, d)\n\n"
        f"    return _target({name}), grad\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """A ``tf.custom_gradient`` of two inputs."""
    # tf.custom_gradient with two inputs: grad returns one gradient per input
    return (
        "import tensorflow\n\n\n" + head +
        "@tensorflow.custom_gradient\n"
        f"def f({x}, {y}):\n"
        "    def grad(upstream):\n"
        f"        tie = tensorflow.equal({x}, {y})\n"
        + _pad(why, " " * 8) +
        f"        a, b = tensorflow.where(tie, {x} + 1.0, {x}), tensorflow.identity({y})\n"
        "        with tensorflow.GradientTape() as tape:\n"
        "            tape.watch([a, b])\n"
        "            out = _target(a, b)\n"
        "        da, db = tape.gradient(out, [a, b], output_gradients=upstream,\n"
        "                               unconnected_gradients=tensorflow.UnconnectedGradients.ZERO)\n"
        f"{comment.replace('    #', '        #')}"
        f"        return tensorflow.where(tie, upstream * {vx}, da), tensorflow.where(tie, upstream * {vy}, db)\n\n"
        f"    return _target({x}, {y}), grad\n"
    )
