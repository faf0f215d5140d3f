"""PyTorch's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.answers.migrate.snippet`, ``string.Template``
text): a ``torch.autograd.Function``."""

#: ``f``: ``$target`` (an expression in ``$name``) with derivative ``$v`` at ``$name == $p``; the ``# $note`` line is
#: left out without a note.
SNIPPET = """import torch


def _target($name):
    return $target


class _F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, $name):
        ctx.save_for_backward($name)
        return _target($name)

    @staticmethod
    def backward(ctx, grad):
        ($name,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = $name.detach().requires_grad_(True)
            (d,) = torch.autograd.grad(_target(leaf), leaf, grad)
        # $note
        return torch.where($name == $p, grad * $v, d)


def f($name):
    return _F.apply($name)
"""

#: ``f($x, $y)``: ``$target`` with derivatives ``$vx``, ``$vy`` wherever ``$x == $y``.
TIE_SNIPPET = """import torch


def _target($x, $y):
    return $target


class _F(torch.autograd.Function):
    @staticmethod
    def forward(ctx, $x, $y):
        ctx.save_for_backward($x, $y)
        return _target($x, $y)

    @staticmethod
    def backward(ctx, grad):
        $x, $y = ctx.saved_tensors
        tie = $x == $y
        # the target's own derivative, taken with $x moved off the tie: there it is replaced, and an inf or
        # NaN evaluated there would reach the result through the unselected branch of the where
        with torch.enable_grad():
            a = torch.where(tie, $x + 1.0, $x).detach().requires_grad_(True)
            b = $y.detach().requires_grad_(True)
            da, db = (torch.zeros_like(v) if d is None else d  # an input the target does not use
                      for d, v in zip(torch.autograd.grad(_target(a, b), (a, b), grad, allow_unused=True),
                                      (a, b)))
        # $note
        return torch.where(tie, grad * $vx, da), torch.where(tie, grad * $vy, db)


def f($x, $y):
    return _F.apply($x, $y)
"""
