"""PaddlePaddle's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.migrate.snippet`)."""

from __future__ import annotations

from textwrap import indent as _pad


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """A ``paddle.autograd.PyLayer`` (reverse mode only)."""
    # paddle.autograd.PyLayer (python/paddle/autograd/py_layer.py). The target's derivative is taken in
    # forward: paddle.grad inside a PyLayer's backward crashes the process (SIGSEGV, 2.6.2 and 3.3.1).
    return (
        "import paddle\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        "class _F(paddle.autograd.PyLayer):\n"
        "    @staticmethod\n"
        f"    def forward(ctx, {name}):\n"
        "        with paddle.enable_grad():\n"
        f"            leaf = {name}.detach()\n"
        "            leaf.stop_gradient = False\n"
        "            y = _target(leaf)\n"
        "            (d,) = paddle.grad(y, leaf, paddle.ones_like(y))  # elementwise: the derivative\n"
        f"        ctx.save_for_backward({name}, d)\n"
        "        return y.detach()\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        f"        {name}, d = ctx.saved_tensor()\n"
        f"{comment.replace('    #', '        #')}"
        f"        return paddle.where({name} == {p}, grad * {v}, grad * d)\n\n\n"
        f"def f({name}):\n    return _F.apply({name})\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """A ``PyLayer`` of two inputs."""
    # PyLayer; the target's derivatives are taken in forward (paddle.grad inside backward crashes, see snippet)
    return (
        "import paddle\n\n\n" + head +
        "class _F(paddle.autograd.PyLayer):\n"
        "    @staticmethod\n"
        f"    def forward(ctx, {x}, {y}):\n"
        f"        tie = {x} == {y}\n"
        + _pad(why, " " * 8) +
        "        with paddle.enable_grad():\n"
        f"            a = paddle.where(tie, {x} + 1.0, {x}).detach()\n"
        f"            b = {y}.detach()\n"
        "            a.stop_gradient = b.stop_gradient = False\n"
        "            out = _target(a, b)\n"
        "            da, db = (paddle.zeros_like(v) if d is None else d  # an input the target does not use\n"
        "                      for d, v in zip(paddle.grad(out, [a, b], paddle.ones_like(out), allow_unused=True),\n"
        "                                      (a, b)))\n"
        f"        ctx.save_for_backward(tie, da, db)\n"
        f"        return _target({x}, {y})\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        "        tie, da, db = ctx.saved_tensor()\n"
        f"{comment.replace('    #', '        #')}"
        f"        return paddle.where(tie, grad * {vx}, grad * da), paddle.where(tie, grad * {vy}, grad * db)\n\n\n"
        f"def f({x}, {y}):\n    return _F.apply({x}, {y})\n"
    )
