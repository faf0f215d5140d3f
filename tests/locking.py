"""What the tests of ``kinkcheck lock`` share: the user's models (PyTorch modules in a module of their own),
that module made importable in a test's folder, and the skip where the installed torch is not 2.13.0."""

from __future__ import annotations

import sys
import textwrap

import pytest

MODELS = textwrap.dedent('''
    import torch
    import torch.nn.functional as F


    class Clamped(torch.nn.Module):
        """A layer whose activation is x.clamp(min=0): 1 at 0 in torch 2.13.0, 0 from 2.14.1 (the report)."""

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 4)

        def forward(self, x):
            return self.layer(x).clamp(min=0).sum()


    class SmallCNN(torch.nn.Module):
        """ReLU, max-pooling over windows that tie (a constant image), a clamp."""

        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(1, 2, 3, padding=1)
            self.pool = torch.nn.MaxPool2d(2)

        def forward(self, x):
            h = torch.nn.functional.relu(self.conv(x))
            h = self.pool(h)
            return h.clamp(min=0.0, max=6.0).flatten(1).sum(1)


    class Block(torch.nn.Module):
        """A transformer block: layer norm, attention's softmax, GELU (tanh), and a max over the features."""

        def __init__(self, d=4):
            super().__init__()
            self.norm = torch.nn.LayerNorm(d)
            self.qkv = torch.nn.Linear(d, 3 * d)
            self.mlp = torch.nn.Linear(d, d)

        def forward(self, x):
            q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
            att = torch.softmax(q @ k.transpose(-2, -1) / 2.0, dim=-1) @ v
            h = x + F.gelu(self.mlp(att), approximate="tanh")
            return torch.amax(h, dim=-1)


    def clamped():
        torch.manual_seed(0)
        return Clamped()


    def on_the_kink():
        """Clamped, its first layer set so that the batch's first row lands two units exactly on 0."""
        torch.manual_seed(0)
        model = Clamped()
        with torch.no_grad():
            model.layer.bias.zero_()
            model.layer.weight.copy_(torch.tensor([[1.0, 1, 0], [0, 1, 1], [1, 0, 1], [1, -1, 0]]))
        return model


    def kink_rows():
        return [torch.tensor([[1.0, -1.0, 1.0], [2.0, 1.0, 3.0]])]


    def cnn():
        torch.manual_seed(0)
        return SmallCNN()


    def block():
        torch.manual_seed(0)
        return Block()


    def rows():
        return [torch.zeros(2, 3), torch.ones(2, 3)]


    def images():
        return [torch.ones(1, 1, 4, 4)]


    def tokens():
        torch.manual_seed(1)
        return [torch.randn(1, 3, 4)]


    def broken():
        raise RuntimeError("the factory fails")


    class Maxed(torch.nn.Module):
        """Two units and the max over them: an input with x0 == x1 ties them."""

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 2, bias=False)

        def forward(self, x):
            return torch.amax(self.layer(x), dim=-1).sum()


    def maxed():
        model = Maxed()
        with torch.no_grad():
            model.layer.weight.copy_(torch.tensor([[1.0, 0, 0], [0, 1, 0]]))
        return model


    def tied_rows():
        return [torch.tensor([[2.0, 2.0, 5.0]])]


    class Pooled(torch.nn.Module):
        """Four units that all give 1 for the input [1, 2, 3, 4] (weights 1, 1/2, 1/3, 1/4), max-pooled as one
        2x2 window: a window whose elements all tie."""

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 4, bias=False)

        def forward(self, x):
            return F.max_pool2d(self.layer(x).reshape(-1, 1, 2, 2), 2).sum()


    def pooled():
        model = Pooled()
        with torch.no_grad():
            model.layer.weight.copy_(torch.diag(torch.tensor([1.0, 1 / 2, 1 / 3, 1 / 4])))
        return model


    def pool_rows():
        return [torch.tensor([[1.0, 2.0, 3.0, 4.0]])]


    class Normed(torch.nn.Module):
        """A batch norm between the layer and its ReLU: in eval mode (fresh running statistics) it passes h through,
        so the batch's h[0, 0] = 0 sits on the kink; in training mode the batch statistics move it off."""

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 2, bias=False)
            self.norm = torch.nn.BatchNorm1d(2)

        def forward(self, x):
            return (F.relu(self.norm(self.layer(x))), x)  # a tuple: the loss is the sum of its float tensors


    def normed():
        model = Normed()
        with torch.no_grad():
            model.layer.weight.copy_(torch.eye(2))
        return model


    def normed_rows():
        return [torch.tensor([[0.0, 1.0], [2.0, 1.0]])]


    def later_ties():
        """No tie in the first batch: the question is asked where the second batch ties (at 1: maximum@tie)."""
        return [torch.tensor([[5.0, 3.0]]), torch.tensor([[1.0, 3.0]])]


    class Maximum(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 2, bias=False)

        def forward(self, x):
            h = self.layer(x)
            return torch.maximum(h[:, :1], torch.ones_like(h[:, :1])).sum() + torch.amax(h, dim=-1).sum()


    def maximum():
        model = Maximum()
        with torch.no_grad():
            model.layer.weight.copy_(torch.eye(2))
        return model
''')



def user_module(folder, monkeypatch, name, text):
    """The user's module ``name`` (``text``) in ``folder``, importable, the current folder, with its own ask home."""
    (folder / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)  # each test imports its own copy
    monkeypatch.chdir(folder)
    monkeypatch.setenv("KINKCHECK_ASK_HOME", str(folder / "ask"))



def installed_2_13_0() -> None:
    from kinkcheck.probe.ondemand import installed_release

    if installed_release("torch") != "2.13.0":
        pytest.skip(f"the report's change of x.clamp(min=0) is from torch 2.13.0; installed: "
                    f"{installed_release('torch')}")
