"""PaddlePaddle's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): a ``paddle.autograd.PyLayer`` (reverse mode only)."""

# paddle.autograd.PyLayer (python/paddle/autograd/py_layer.py). The target's derivative is taken in
# forward: paddle.grad inside a PyLayer's backward crashes the process (SIGSEGV, 2.6.2 and 3.3.1).
#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import paddle


def _target($name):
    return $target


class _F(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, $name):
        with paddle.enable_grad():
            leaf = $name.detach()
            leaf.stop_gradient = False
            y = _target(leaf)
            (d,) = paddle.grad(y, leaf, paddle.ones_like(y))  # elementwise: the derivative
        ctx.save_for_backward($name, d)
        return y.detach()

    @staticmethod
    def backward(ctx, grad):
        $name, d = ctx.saved_tensor()
        # $note
        return paddle.where($name == $p, grad * $v, grad * d)


def f($name):
    return _F.apply($name)
"""

# PyLayer; the target's derivatives are taken in forward (paddle.grad inside backward crashes, see snippet)
#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import paddle


def _target($x, $y):
    return $target


class _F(paddle.autograd.PyLayer):
    @staticmethod
    def forward(ctx, $x, $y):
        tie = $x == $y
        # the target's own derivative, taken with $x moved off the tie: there it is replaced, and an inf or
        # NaN evaluated there would reach the result through the unselected branch of the where
        with paddle.enable_grad():
            a = paddle.where(tie, $x + 1.0, $x).detach()
            b = $y.detach()
            a.stop_gradient = b.stop_gradient = False
            out = _target(a, b)
            da, db = (paddle.zeros_like(v) if d is None else d  # an input the target does not use
                      for d, v in zip(paddle.grad(out, [a, b], paddle.ones_like(out), allow_unused=True),
                                      (a, b)))
        ctx.save_for_backward(tie, da, db)
        return _target($x, $y)

    @staticmethod
    def backward(ctx, grad):
        tie, da, db = ctx.saved_tensor()
        # $note
        return paddle.where(tie, grad * $vx, grad * da), paddle.where(tie, grad * $vy, grad * db)


def f($x, $y):
    return _F.apply($x, $y)
"""
