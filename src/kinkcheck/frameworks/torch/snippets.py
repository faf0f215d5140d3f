"""PyTorch's code templates for ``kinkcheck migrate`` (:func:`kinkcheck.migrate.snippet`)."""

from __future__ import annotations

from textwrap import indent as _pad


def snippet(target: str, name: str, p: str, v: str, comment: str) -> str:
    """A ``torch.autograd.Function``."""
    return (
        "import torch\n\n\n"
        f"def _target({name}):\n    return {target}\n\n\n"
        "class _F(torch.autograd.Function):\n"
        "    @staticmethod\n"
        f"    def forward(ctx, {name}):\n"
        f"        ctx.save_for_backward({name})\n"
        f"        return _target({name})\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        f"        ({name},) = ctx.saved_tensors\n"
        "        with torch.enable_grad():\n"
        f"            leaf = {name}.detach().requires_grad_(True)\n"
        "            (d,) = torch.autograd.grad(_target(leaf), leaf, grad)\n"
        f"{comment.replace('    #', '        #')}"
        f"        return torch.where({name} == {p}, grad * {v}, d)\n\n\n"
        f"def f({name}):\n    return _F.apply({name})\n"
    )


def tie_snippet(target: str, x: str, y: str, vx: str, vy: str, comment: str, why: str, head: str) -> str:
    """A ``torch.autograd.Function`` of two inputs."""
    return (
        "import torch\n\n\n" + head +
        "class _F(torch.autograd.Function):\n"
        "    @staticmethod\n"
        f"    def forward(ctx, {x}, {y}):\n"
        f"        ctx.save_for_backward({x}, {y})\n"
        f"        return _target({x}, {y})\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad):\n"
        f"        {x}, {y} = ctx.saved_tensors\n"
        f"        tie = {x} == {y}\n"
        + _pad(why, " " * 8) +
        "        with torch.enable_grad():\n"
        f"            a = torch.where(tie, {x} + 1.0, {x}).detach().requires_grad_(True)\n"
        f"            b = {y}.detach().requires_grad_(True)\n"
        "            da, db = (torch.zeros_like(v) if d is None else d  # an input the target does not use\n"
        "                      for d, v in zip(torch.autograd.grad(_target(a, b), (a, b), grad, allow_unused=True),\n"
        "                                      (a, b)))\n"
        f"{comment.replace('    #', '        #')}"
        f"        return torch.where(tie, grad * {vx}, da), torch.where(tie, grad * {vy}, db)\n\n\n"
        f"def f({x}, {y}):\n    return _F.apply({x}, {y})\n"
    )
