"""``kinkcheck census`` (kinkcheck.answers.hitcensus; its networks in frameworks/<name>/hitcensus.py): the reference
experiment's logic on networks built to hit the kink, the user-model census and its one-line errors, and the rendered
tables."""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed in this Python")
pytest.importorskip("sklearn", reason="scikit-learn is not installed in this Python (pip install scikit-learn)")

from kinkcheck.answers import hitcensus as hc  # noqa: E402
from kinkcheck.frameworks.torch import hitcensus as th  # noqa: E402
from kinkcheck.cli import main  # noqa: E402
from kinkcheck.probe.userhits import user_census  # noqa: E402


@pytest.mark.parametrize("s", [0.0, 0.5, 1.0])
def test_relu_at0_has_the_chosen_derivative_at_0_only(s):
    x = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    th._relu_at0(s)(x).sum().backward()
    assert x.grad.tolist() == [0.0, s, 1.0]


def test_the_digits_ship_offline():
    X, Y = th.digits()
    assert tuple(X.shape) == (1797, 64) and float(X.max()) == 1.0 and set(Y.tolist()) == set(range(10))


@pytest.fixture()
def zero_first_layer(monkeypatch):
    """th.mlp with its first layer zeroed (every first-layer pre-activation exactly 0); th.mlp itself back
    with ``restore()``."""
    real_mlp = th.mlp

    def zeroed(depth, width, dtype, seed):
        layers = real_mlp(depth, width, dtype, seed)
        with torch.no_grad():
            layers[0].weight.zero_()
            layers[0].bias.zero_()
        return layers

    monkeypatch.setattr(th, "mlp", zeroed)
    return lambda: monkeypatch.setattr(th, "mlp", real_mlp)


def test_an_initialisation_on_the_kink_differs_and_one_off_it_does_not(zero_first_layer):
    """A zero first layer puts every first-layer pre-activation at 0: every initialisation differs
    (ReLU'(0) = 0 vs 1, and ½), and torch.relu agrees with ReLU'(0) = 0. Random inputs in float64 never sit
    at 0: nothing differs and no backward pass is run."""
    scale = hc.Scale(depths=(2,), dtypes=("float32",), inits=3, width=8, batch=16)
    X, Y = torch.ones(32, 64, dtype=torch.float64), torch.arange(32) % 10
    cell = th.bifurcation(scale, 2, "float32", X, Y)
    assert (cell.differ, cell.inits, cell.minibatches, cell.minibatches_with_hits) == (3, 3, 6, 6), cell
    assert cell.hits[0] == 6 * 16 * 8, "every first-layer pre-activation of every minibatch is 0"
    assert cell.convention_differs["torch.relu(x)"] == 0, "torch.relu'(0) = 0"
    assert cell.convention_differs["relu'(0)=1"] == 6 and cell.convention_differs["relu'(0)=0.5"] == 6
    zero_first_layer()  # th.mlp itself again
    X = torch.rand(32, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5
    cell = th.bifurcation(hc.Scale(depths=(2,), dtypes=("float64",), inits=2, width=8, batch=16), 2, "float64",
                          X, Y)
    assert cell.differ == 0 and cell.minibatches_with_hits == 0 and sum(cell.hits) == 0, cell


def test_the_skipped_backward_is_the_same_gradient():
    """Without a pre-activation at 0 the two conventions' gradients are equal bit for bit: what lets the
    experiment skip both backward passes on such a minibatch."""
    layers = th.mlp(3, 16, "float32", 7)
    x, y = torch.rand(8, 64, generator=torch.Generator().manual_seed(2)), torch.arange(8)
    _, hits = th._forward(layers, x, th._activation("relu'(0)=0"))
    assert not any(hits)
    assert torch.equal(th._first_grad(layers, x, y, th._activation("relu'(0)=0")),
                       th._first_grad(layers, x, y, th._activation("relu'(0)=1")))


def test_a_small_run_renders_beside_the_paper():
    record = hc.run(hc.Scale(depths=(1,), dtypes=("float64", "float16"), inits=2, width=8, train_epochs=1))
    assert record["schema"] == "kinkcheck/kinkhits/v1" and len(record["cells"]) == 2
    assert [(t["dtype"], t["convention"]) for t in record["training"]] == [("float16", "relu'(0)=0"),
                                                                           ("float16", "relu'(0)=1")]
    text = hc.render_run(json.loads(json.dumps(record)))
    row64 = next(ln for ln in text.splitlines() if ln.startswith("| float64 | 1 |"))
    assert "not run" in row64, "the paper's depth sweep never ran at 64 bits: said, not shown as 0"
    row16 = next(ln for ln in text.splitlines() if ln.startswith("| float16 | 1 |"))
    assert "87.1 %" in row16, row16


@pytest.fixture()
def user_module(tmp_path, monkeypatch):
    (tmp_path / "usermodel.py").write_text(textwrap.dedent('''
        import torch

        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(2, 3)

            def forward(self, x):
                return torch.nn.functional.relu(self.lin(x))

        def make():
            net = Net()
            with torch.no_grad():
                net.lin.weight.zero_()
                net.lin.bias.copy_(torch.tensor([0.0, 1.0, 0.0]))
            return net

        def data():
            return [(torch.ones(4, 2), None), (torch.zeros(4, 2), None), (torch.ones(4, 2), None)]

        def jax_model():
            import jax
            import jax.numpy as jnp

            def apply(params, x):
                return jnp.max(jax.nn.relu(x @ params["w"]), axis=1)

            return apply, {"w": jnp.array([[1.0, 0.0], [0.0, 0.0]])}

        def jax_data():
            import jax.numpy as jnp

            return [jnp.ones((2, 2)), jnp.zeros((2, 2))]

        class Dropping(torch.nn.Module):
            def forward(self, x):
                return torch.relu(torch.nn.functional.dropout(x.abs() + 1, 0.5, self.training))

        def dropping():
            torch.manual_seed(0)
            return Dropping()

        def failing_data():
            yield torch.ones(2, 2)
            raise OSError("disk gone")

        def broken():
            raise RuntimeError("no such checkpoint")

        def not_a_model():
            return 42
    '''))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_user_model_census_counts_hits_per_layer(user_module, capsys):
    framework, sites, _ = user_census("usermodel:make", "usermodel:data", batches=2)
    assert framework == "torch"
    assert [(s.program, s.calls, s.elements, s.hits) for s in sites] == [
        ("torch.nn.functional.relu", 2, 24, 16)], "two batches of 4 rows, two of three biases at 0"
    assert main(["census", "--model", "usermodel:make", "--data", "usermodel:data", "--report", "none"]) == 0
    out = capsys.readouterr().out
    assert "| 0 | `torch.nn.functional.relu` | x = 0 | float32 | 24 | 36 | no report |" in out, out
    assert "(torch; the module in training mode, as its factory left it" in out, "the mode it ran in is said"


@pytest.mark.parametrize(("argv", "words"), [
    (["--model", "usermodel:make"], "--model and --data go together"),
    (["--model", "usermodel:nope", "--data", "usermodel:data", "--report", "none"], "usermodel has no function 'nope'"),
    (["--model", "nomodule:make", "--data", "usermodel:data", "--report", "none"], "cannot import nomodule"),
    (["--model", "usermodel:broken", "--data", "usermodel:data", "--report", "none"], "RuntimeError: no such checkpoint"),
    (["--model", "usermodel:not_a_model", "--data", "usermodel:data", "--report", "none"], "returned a int"),
    (["--model", "usermodel:make", "--data", "usermodel:make", "--report", "none"], "not an iterable of batches"),
    (["--dtypes", "float8"], "unknown dtype 'float8'"),
    (["--depths", "1,x"], "--depths takes integers"),
    (["--batch", "5000"], "--batch at most 1797"),
    (["--width", "100000000"], "--width at most 4096"),
    (["--train-epochs", "-1"], "--train-epochs at least 0"),
    (["--model", "usermodel:make", "--data", "usermodel:data", "--batches", "0"], "--batches at least 1"),
    (["--model", "usermodel:make", "--data", "usermodel:failing_data", "--report", "none"],
     "--data usermodel:failing_data failed on batch 2: OSError: disk gone"),
    (["--model", "usermodel:make", "--data", "usermodel:data", "--report", "nope.json"], "--report nope.json"),
    (["--out", "."], "is a folder; name a file"),
    (["--out", "usermodel.py/x.json"], "is not a folder this user can write into"),
])
def test_bad_input_is_one_line_exit_2(user_module, capsys, argv, words):
    assert main(["census", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_an_existing_measurement_is_not_replaced_without_asking(tmp_path, capsys):
    out = tmp_path / "kinkhits.json"
    out.write_text("{}")
    assert main(["census", "--out", str(out), "--inits", "1"]) == 2
    assert "exists (a measurement); --replace" in capsys.readouterr().err and out.read_text() == "{}"


def test_the_committed_measurement_shows_the_papers_trend():
    """The issue's test of the reproduction, on the committed measurement: float64 never differs, float16 differs
    more often than float32 at every depth, and float16's proportion does not fall with depth."""
    from pathlib import Path

    from kinkcheck.judge.build import kink_hits

    (k,) = [k for k in kink_hits(Path(__file__).resolve().parents[2] / "references" / "kinkhits")
            if k.file == "torch-2.13.0-cpu.json"]
    assert k.error is None and k.scale["inits"] >= 100, k.error
    by = {(c.dtype, c.depth): c.differ / c.inits for c in k.cells}
    depths = sorted({d for _, d in by})
    assert depths == [1, 2, 3, 4, 5]
    assert all(by[("float64", d)] == 0 for d in depths), "no pre-activation exactly 0 in float64"
    assert all(by[("float16", d)] > by[("float32", d)] for d in depths), by
    assert [by[("float16", d)] for d in depths] == sorted(by[("float16", d)] for d in depths), by
    assert k.seconds < 600, "the reference census fits in 10 minutes on the 2-core machine"


def test_an_unreadable_measurement_is_one_line_in_the_report(tmp_path):
    from kinkcheck.judge.build import kink_hits

    (tmp_path / "a.json").write_text('{"schema": "kinkcheck/kinkhits/v1", "cells": [{"dtype": 1}]}')
    (tmp_path / "b.json").write_text("{not json")
    (tmp_path / "c.json").write_text('{"schema": "something/else"}')
    got = kink_hits(tmp_path)
    assert [k.file for k in got] == ["a.json", "b.json", "c.json"] and all(k.error for k in got), got
    assert "not a kinkcheck/kinkhits/v1 record" in got[2].error and all("\n" not in k.error for k in got)
    assert kink_hits(tmp_path / "absent") == []


def test_a_jax_model_is_counted_by_its_jaxpr(user_module):
    pytest.importorskip("jax", reason="JAX is not installed in this Python")
    framework, sites, _ = user_census("usermodel:jax_model", "usermodel:jax_data", batches=5)
    assert framework == "jax"
    # x @ w: ones give [[1, 0], [1, 0]] (2 zeros), zeros give all 0 (4); the max over axis 1 ties in both zero rows
    assert [(s.program, s.calls, s.elements, s.hits) for s in sites] == [("relu: max", 2, 8, 6),
                                                                        ("reduce_max", 2, 4, 2)], sites


def test_the_mode_a_module_runs_in_is_said_and_eval_can_be_asked(user_module, capsys):
    """In training mode dropout's zeros reach the ReLU as hits; ``--eval`` runs the module without them."""
    _, sites, mode = user_census("usermodel:dropping", "usermodel:data", batches=1)
    relu = next(s for s in sites if s.program == "torch.relu")
    assert "training mode" in mode and relu.hits > 0, (mode, sites)
    _, sites, mode = user_census("usermodel:dropping", "usermodel:data", batches=1, eval_mode=True)
    relu = next(s for s in sites if s.program == "torch.relu")
    assert mode == "the module in eval mode" and relu.hits == 0, (mode, sites)
    assert main(["census", "--model", "usermodel:dropping", "--data", "usermodel:data", "--report", "none",
                 "--eval"]) == 0
    assert "(torch; the module in eval mode):" in capsys.readouterr().out


def test_no_training_run_with_zero_epochs():
    record = hc.run(hc.Scale(depths=(1,), dtypes=("float16",), inits=1, width=4, train_epochs=0))
    assert record["training"] == [] and "Training" not in hc.render_run(record)


def test_the_jax_census_runs_the_same_networks_and_finds_the_same_kink(zero_first_layer):
    """JAX on the initialisations PyTorch draws: with a zero first layer every pre-activation is 0 there too,
    every initialisation differs, and jax.nn.relu takes 0 at 0 (as ReLU'(0) = 0) while jnp.maximum(x, 0.0)
    takes ½ (it differs)."""
    pytest.importorskip("jax", reason="JAX is not installed in this Python")
    from kinkcheck.frameworks.jax import hitcensus as jh

    scale = hc.Scale(depths=(2,), dtypes=("float32",), inits=2, width=8, batch=16)
    X, Y = torch.ones(32, 64, dtype=torch.float64), torch.arange(32) % 10
    cell = jh.bifurcation(scale, 2, "float32", X, Y)
    assert (cell.differ, cell.minibatches, cell.minibatches_with_hits, cell.hits[0]) == (2, 4, 4, 4 * 16 * 8), cell
    assert cell.convention_differs["jax.nn.relu(x)"] == 0 and cell.convention_differs["jax.numpy.maximum(x, 0.0)"] == 4
    zero_first_layer()  # th.mlp itself again
    X = torch.rand(32, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5
    cell = jh.bifurcation(hc.Scale(depths=(1,), dtypes=("float64",), inits=2, width=8, batch=16), 1, "float64",
                              X, Y)
    assert cell.differ == 0 and sum(cell.hits) == 0, cell


def test_a_missing_library_is_one_line_before_any_progress(monkeypatch, capsys) -> None:
    """A newcomer without scikit-learn (or torch) gets the one line that says so, not a progress bar first."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    assert main(["census", "--inits", "1", "--depths", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kinkcheck: error: census needs PyTorch and scikit-learn") and \
        "sklearn" in err[0], f"one line, naming what is missing: {err}"
