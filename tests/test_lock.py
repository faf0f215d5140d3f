"""``kinkcheck lock`` (issue 34, items 2, 3 and 5): a model's conventions locked, checked against another release."""

from __future__ import annotations

import sys
import textwrap

import msgspec
import pytest
from damage import FAULTS

from kinkcheck.answers import lock
from kinkcheck.cli import main

torch = pytest.importorskip("torch", reason="the models locked here are PyTorch modules")

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


def _user_module(folder, monkeypatch, name, text):
    """The user's module ``name`` (``text``) in ``folder``, importable, the current folder, with its own ask home."""
    (folder / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)  # each test imports its own copy
    monkeypatch.chdir(folder)
    monkeypatch.setenv("KINKCHECK_ASK_HOME", str(folder / "ask"))


@pytest.fixture()
def models(tmp_path, monkeypatch):
    _user_module(tmp_path, monkeypatch, "usermodels", MODELS)
    return tmp_path


def _installed_2_13_0() -> None:
    from kinkcheck.probe.ondemand import installed_release

    if installed_release("torch") != "2.13.0":
        pytest.skip(f"the report's change of x.clamp(min=0) is from torch 2.13.0; installed: "
                    f"{installed_release('torch')}")


def test_a_clamp_locked_under_2_13_0_fails_against_2_14_1_and_passes_against_2_13_0(models, capsys):
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--quiet"]) == 0
    written = lock.read_lock(models / "kinkcheck.lock")
    (site,) = written.site
    assert (site.operation, site.program, site.at, site.case, site.source) == (
        "torch.Tensor.clamp", "x.clamp(min=0)", "x=0.0", "relu@0", "report"), site
    assert site.call == "usermodels.py:14" and site.dtype == "float32", "the user's line, the model's dtype"
    assert (site.value, site.labels[0]) == ({"x": 1.0}, "right"), site
    capsys.readouterr()

    assert main(["lock", "--check", "--release", "2.14.1", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert ("usermodels.py:14: torch.Tensor.clamp (x.clamp(min=0) at x=0.0, float32): 1 (right) in torch 2.13.0 → "
            "0 (left) in 2.14.1; read ") in out and "reports/cases/relu-at-0.md\n" in out, out
    assert "1 of 1 locked convention(s) changed from torch 2.13.0 to 2.14.1" in out, out

    assert main(["lock", "--check", "--framework-version", "torch==2.13.0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "0 of 1 locked convention(s) changed" in out and "nothing the model relies on changes" in out, out


def test_a_small_cnn_locks_relu_the_tied_pool_and_the_clamp(models, capsys):
    assert main(["lock", "--model", "usermodels:cnn", "--data", "usermodels:images", "--quiet"]) == 0
    written = lock.read_lock(models / "kinkcheck.lock")
    by_op = {s.operation: s for s in written.site}
    assert set(by_op) == {"torch.nn.functional.relu", "torch.nn.functional.max_pool2d", "torch.Tensor.clamp"}, by_op
    relu = by_op["torch.nn.functional.relu"]
    assert (relu.program, relu.case, relu.source) == ("torch.nn.functional.relu(x)", "relu@0", "report"), relu
    pool = by_op["torch.nn.functional.max_pool2d"]
    assert pool.source == "measured" and pool.case is None and pool.status == "ok", pool
    assert pool.hits > 0, "a constant image ties every window"
    clamp = by_op["torch.Tensor.clamp"]
    assert (clamp.program, clamp.at) == ("x.clamp(min=0.0, max=6.0)", "x=0.0"), clamp
    assert all(s.call.startswith("usermodels.py:") for s in written.site), [s.call for s in written.site]
    assert relu.predicted is None, "a report cell is no prediction's place"
    assert pool.predicted is not None and clamp.predicted is not None, "no report cell: the prediction beside it"
    if clamp.predicted.value is not None:  # the installed release is one the rules file holds
        assert clamp.predicted.value == clamp.value and clamp.predicted.rules[0].operation == "torch.clamp", clamp
        assert "[site.predicted]  # predicted from the rules, not measured" in (models / "kinkcheck.lock").read_text()
    capsys.readouterr()
    assert main(["lock", "--check", "--quiet"]) == 0, "the installed release against itself changes nothing"


def test_a_transformer_block_locks_its_max_and_not_its_smooth_functions(models):
    made = lock.make_lock("usermodels:block", "usermodels:tokens", quiet=True)
    ops = [s.operation for s in made.site]
    assert ops == ["torch.amax"], f"gelu, softmax and layer norm are smooth: only the max is a kink: {ops}"
    (site,) = made.site
    assert (site.program, site.at) == ("torch.amax(v, dim=-1)", "v=[1.0,1.0]"), site
    assert site.status == "ok" and site.value is not None, site


@pytest.mark.parametrize("argv, why", [
    (["lock", "--model", "nomodule:make", "--data", "usermodels:rows"], "--model: cannot import nomodule"),
    (["lock", "--model", "usermodels:broken", "--data", "usermodels:rows"],
     "--model usermodels:broken failed: RuntimeError: the factory fails"),
    (["lock", "--model", "usermodels:clamped"], "--model MODULE:FUNCTION and --data MODULE:FUNCTION"),
    (["lock", "--check", "--release", "9.9.9"], "unknown release '9.9.9' of torch"),
    (["lock", "--check", "--framework-version", "jax"], "write it as FRAMEWORK==VERSION"),
    (["lock", "--check", "--framework-version", "caffe==1.0"], "unknown framework 'caffe'"),
    (["lock", "--check", "--framework-version", "jax==9.9"], "unknown release '9.9' of jax"),
    (["lock", "--check", "--lock", "missing.lock"], "cannot read the lock missing.lock (No such file"),
    (["lock", "--check", "--release", ""], "--release is empty"),
    (["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--batches", "0"],
     "--batches must be 1 or more, got 0"),
    (["lock", "--model", "", "--data", "usermodels:rows"], "--model is empty: name MODULE:FUNCTION"),
    (["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--lock", "usermodels.py"],
     "--lock usermodels.py exists and is not a kinkcheck lock: not written over"),
    (["lock", "--release", "2.14.1", "--model", "usermodels:clamped", "--data", "usermodels:rows"],
     "go with --check"),
    (["lock", "--check", "--device", "cuda"], "the report measured torch on cuda in 2.11.0, not 2.13.0"),
    (["lock", "--check", "--device", "cuda", "--framework-version", "jax==0.11.2"],
     "--device or --isa, or --framework-version, not both"),
    (["lock", "--check", "--isa", "x86-64-v2"], "the report measured torch at x86-64-v2 in 2.15.0, not 2.13.0"),
    (["lock", "--check", "--device", "cuda", "--isa", "x86-64-v2"], "--device or --isa, not both"),
    (["lock", "--check", "--isa", "avx2"], "argument --isa: invalid choice: 'avx2'"),
    (["lock", "--isa", "x86-64-v2", "--model", "usermodels:clamped", "--data", "usermodels:rows"], "go with --check"),
])
def test_bad_input_is_one_line_and_the_lock_is_kept(models, capsys, argv, why):
    before = lock.lock_text(lock.Lock(schema=lock.SCHEMA, framework="torch", release="2.13.0", device="cpu",
                                      model="usermodels:clamped", data="usermodels:rows", written_by="a test"))
    (models / "kinkcheck.lock").write_text(before)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and why in lines[0] and "Traceback" not in err, err
    assert (models / "kinkcheck.lock").read_text() == before, "nothing overwritten"
    assert (models / "usermodels.py").read_text() == MODELS, "a file that is not a lock is never written over"


@pytest.mark.parametrize("edit, why", [
    (lambda t: t.replace("hits = 0", 'hits = "many"'), "Expected `int`, got `str` - at `$.site[0].hits`"),
    (lambda t: t.replace('schema = "kinkcheck/lock/v1"', 'schema = "poetry/lock"'), "is not a kinkcheck lock"),
    (lambda t: t.replace('status = "ok"', 'status = "fine"'), "Invalid enum value 'fine'"),
    (lambda t: t + "\nsurprise = 1\n", "unknown field"),
    (lambda t: t.replace("[[site]]", "[[site"), "is not TOML"),
    (lambda t: "[package]\nname = 'requests'\n", "is not a kinkcheck lock"),
    (lambda t: t.replace('at = "x=0.0"', 'at = "x=nan"'), "'x.clamp(min=0)' at 'x=nan'"),
    (lambda t: t.replace('dtype = "float32"', 'dtype = "float99"'), "unknown dtype 'float99' at $.site[0]"),
    (lambda t: t.replace("index = 0", "index = -5"), "index -5 at $.site[0]"),
    (lambda t: t.replace('value = { "x" = 1.0 }', 'value = { "y" = 1.0 }'), "is not a gradient of the inputs"),
    (lambda t: t.replace('framework = "torch"', 'framework = "autograd"'), "operation 'torch.Tensor.clamp' is not"),
    (lambda t: t.replace('release = "2.13.0"', 'release = "latest"'), "release 'latest' is not a version"),
    (lambda t: t.replace('labels = ["right", "in-clarke"]', 'labels = ["sideways"]'), "unknown label 'sideways'"),
    (lambda t: t.replace('case = "relu@0"', 'case = "nosuch@0"'),
     "case 'nosuch@0' is not the catalog's case of x.clamp(min=0) at x=0.0"),
    (lambda t: t + '\n[[unlocked]]\nindex = 0\noperation = "torch.relu"\ncall = "m.py:1"\nkink = "x = 0"\nwhy = "a"\n',
     "index 0 is given to two sites"),
    (lambda t: t.replace('value = { "x" = 1.0 }', 'value = { "x" = "abc" }'), "is not a gradient of the inputs"),
    (lambda t: t.replace('value = { "x" = 1.0 }', 'value = { "x" = [1.0, 2.0] }'), "is not a gradient of the inputs"),
    (lambda t: t.replace('value = { "x" = 1.0 }', 'value = { "x" = true }'), "is not a gradient of the inputs"),
])
def test_a_lock_edited_into_nonsense_or_from_elsewhere_is_one_line(models, capsys, edit, why):
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--quiet"]) == 0
    path = models / "kinkcheck.lock"
    path.write_text(edit(path.read_text()))
    capsys.readouterr()
    assert main(["lock", "--check", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1 and err.startswith("kinkcheck: error: "), err


def test_the_lock_round_trips_through_its_toml(models):
    site = lock.LockedSite(index=0, operation="torch.maximum", call="m.py:3", kink="tie", dtype="float64", hits=2,
                           elements=4, program="torch.maximum(x, y)", at="x=0,y=0", status="ok",
                           value={"x": 0.5, "y": 0.5}, labels=["split-even"], source="measured")
    held = lock.Lock(schema=lock.SCHEMA, framework="torch", release="2.13.0", device="cpu", model="m:make",
                     data="m:data", written_by="kinkcheck test", site=[site],
                     unlocked=[lock.UnlockedSite(index=1, operation="torch.nn.functional.prelu", call="m.py:4",
                                                 kink="x = 0", why="prelu: its slope is a weight tensor: not asked")])
    lock.write_lock(held, models / "x.lock")
    assert lock.read_lock(models / "x.lock") == held
    assert msgspec.toml.decode((models / "x.lock").read_bytes())["site"][0]["value"] == {"x": 0.5, "y": 0.5}


def test_the_documented_ci_step_runs_and_guards(models, capsys):
    """docs/lock.md's GitHub Actions step: valid YAML, and its kinkcheck command exits 0 on a lock of the installed
    release and 1 on one the installed release changes."""
    import re
    import shlex
    from pathlib import Path

    import yaml

    _installed_2_13_0()
    doc = (Path(__file__).resolve().parents[1] / "docs" / "lock.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    (step,) = yaml.safe_load(block)
    commands = [shlex.split(ln) for ln in step["run"].splitlines() if ln.strip().startswith("kinkcheck ")]
    assert commands == [["kinkcheck", "lock", "--check", "--quiet"]], commands
    assert main(["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--quiet"]) == 0
    capsys.readouterr()
    assert main(commands[0][1:]) == 0, "the lock of the installed release passes"
    written = lock.read_lock(models / "kinkcheck.lock")
    site = msgspec.structs.replace(written.site[0], value={"x": 0.0}, labels=["left", "in-clarke"])
    lock.write_lock(msgspec.structs.replace(written, release="2.14.1", site=[site]), models / "kinkcheck.lock")
    assert main(commands[0][1:]) == 1, "a lock of 2.14.1's convention fails under 2.13.0"


JAX_MODEL = textwrap.dedent('''
    import jax
    import jax.numpy as jnp


    def apply(params, x):
        w1, w2 = params
        h = jax.nn.relu(x @ w1)
        return jnp.max(h @ w2, axis=-1)


    def mlp():
        key = jax.random.PRNGKey(0)
        return apply, (jax.random.normal(key, (3, 4)), jax.random.normal(key, (4, 2)))


    def rows():
        return [jnp.zeros((2, 3)), jnp.ones((2, 3))]
''')


def test_a_jax_mlp_is_locked_and_checked_against_an_older_release(tmp_path, monkeypatch, capsys):
    """``(apply, params)`` as census takes it: relu's ``max`` inside ``jax.nn.relu`` is asked as ``jax.nn.relu(x)``
    (the catalog's relu@0: the report's cell), the reduction as ``jax.numpy.max(v)`` at a tie; checked against
    0.4.30 from the report's cells, nothing changes."""
    pytest.importorskip("jax", reason="a JAX model")
    from kinkcheck.probe.ondemand import installed_release

    _user_module(tmp_path, monkeypatch, "jaxmodel", JAX_MODEL)
    assert main(["lock", "--model", "jaxmodel:mlp", "--data", "jaxmodel:rows", "--quiet"]) == 0
    written = lock.read_lock(tmp_path / "kinkcheck.lock")
    assert written.framework == "jax" and written.release == installed_release("jax"), written
    got = [(s.operation, s.call, s.program, s.at, s.case, s.source, s.labels[0]) for s in written.site]
    assert got == [("relu: max", "jaxmodel.py:8", "jax.nn.relu(x)", "x=0.0", "relu@0", "report", "left"),
                   ("reduce_max", "jaxmodel.py:9", "jax.numpy.max(v)", "v=[1.0,1.0]", got[1][4], "report",
                    "split-even")], got
    capsys.readouterr()
    assert main(["lock", "--check", "--release", "0.4.30", "--quiet"]) == 0
    assert "0 of 2 locked convention(s) changed from jax" in capsys.readouterr().out


def test_a_change_says_how_far_it_moves_the_first_layers_gradient_on_the_batch(models, capsys):
    """Two units of the first row sit exactly on the clamp's kink; with 2.14.1's 0 for 2.13.0's 1 there, their
    share of the first weight's gradient (the output's sum: 1 · x_row for each unit) goes: |Δ| = |x_row| = 1;
    the largest entry is unit 0's third, 1 + 3 from both rows."""
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:on_the_kink", "--data", "usermodels:kink_rows", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["lock", "--check", "--release", "2.14.1", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "on your first batch the first layer's gradient moves by up to 1 (its largest entry: 4)" in out, out
    assert main(["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["lock", "--check", "--release", "2.14.1", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "the first layer's gradient does not move: no element of the first batch sits on the kink as the lock's " \
           "question has it" in out, out


def test_the_shift_is_measured_when_the_installed_release_is_the_one_checked(models, capsys, monkeypatch, tmp_path):
    """pytest --kinkcheck-lock and plain --check compare the lock with the installed release: the lock's value (a
    lock of 2.14.1's 0) and the installed one's (2.13.0's 1) are the two conventions run; and the model's module is
    found beside the lock, from any folder."""
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:on_the_kink", "--data", "usermodels:kink_rows", "--quiet"]) == 0
    written = lock.read_lock(models / "kinkcheck.lock")
    site = msgspec.structs.replace(written.site[0], value={"x": 0.0}, labels=["left", "in-clarke"])
    lock.write_lock(msgspec.structs.replace(written, release="2.14.1", site=[site]), models / "kinkcheck.lock")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.delitem(sys.modules, "usermodels", raising=False)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(models)])
    capsys.readouterr()
    assert main(["lock", "--check", "--lock", str(models / "kinkcheck.lock"), "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "0 (left) in torch 2.14.1 → 1 (right) in 2.13.0" in out, out
    assert "the first layer's gradient moves by up to 1 (its largest entry: 4)" in out, out


def test_a_lock_checked_against_another_framework_pairs_the_cases_programs(models, capsys):
    """--framework-version jax==0.4.30 on a torch lock: each site whose question is a catalog case against every jax
    program of that case (the report's cells, as migrate pairs them); a site that is no catalog case is said to be
    not compared."""
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:cnn", "--data", "usermodels:images", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["lock", "--check", "--framework-version", "jax==0.4.30", "--quiet"]) == 1
    out = capsys.readouterr().out
    relu = [ln for ln in out.splitlines() if ln.startswith("usermodels.py:") and "torch.nn.functional.relu(x)" in ln]
    assert any("0 (left) in torch 2.13.0 → 0.5 (mean) in jax 0.4.30 (jax.numpy.maximum(x, 0.0))" in ln
               for ln in relu), out
    assert not any("(jax.nn.relu(x))" in ln for ln in relu), "jax.nn.relu keeps torch's 0 at 0: not a change"
    assert "max_pool2d" in out and "not compared: no catalog case holds this program at this point" in out, out
    assert "its size on your batch is not measured across frameworks" in out and "not compared)" in out, out



JAX_CNN = textwrap.dedent('''
    import jax
    import jax.numpy as jnp


    def apply(params, x):
        h = jax.nn.relu(jax.lax.conv_general_dilated(x, params, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum(axis=(1, 2, 3))


    def cnn():
        return apply, jnp.zeros((3, 3, 1, 2))


    def images():
        return [jnp.ones((1, 4, 4, 1))]
''')


def test_a_jax_pool_over_tied_windows_is_locked_as_one_window_of_ties(tmp_path, monkeypatch, capsys):
    """flax's max_pool is ``lax.reduce_window`` with ``lax.max``: a window whose elements all tie (zero weights: every
    activation is 0) is asked as ``jax.lax.reduce_window`` with the call's window and strides at one window of
    ones, measured live (no catalog case is at that point), and passes against the installed release."""
    pytest.importorskip("jax", reason="a JAX model")
    _user_module(tmp_path, monkeypatch, "jaxcnn", JAX_CNN)
    assert main(["lock", "--model", "jaxcnn:cnn", "--data", "jaxcnn:images", "--quiet"]) == 0
    written = lock.read_lock(tmp_path / "kinkcheck.lock")
    assert not written.unlocked, written.unlocked
    pool = next(s for s in written.site if s.operation == "reduce_window_max")
    assert (pool.program, pool.at, pool.source, pool.status) == (
        "jax.lax.reduce_window(m, -jax.numpy.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), ((0, 0), (0, 0), (0, 0), "
        "(0, 0)))", "m=[[[[1.0],[1.0]],[[1.0],[1.0]]]]", "measured", "ok"), pool
    grads = [g for row in pool.value["m"][0] for g in (x[0] for x in row)]
    assert sum(grads) == 1.0 and pool.labels, f"one window's gradient sums to 1 among its tied elements: {pool}"
    capsys.readouterr()
    assert main(["lock", "--check", "--quiet"]) == 0, capsys.readouterr()


# --------------------------------------------------------------------------- another device


def test_a_lock_checked_on_cuda_compares_the_reports_cuda_cells(models, capsys):
    """--device cuda --release 2.11.0: each site that is a catalog case against the report's cell of the same program
    measured on an NVIDIA GPU (no GPU here); the others are not compared. The CNN's relu keeps 0 on CUDA."""
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:cnn", "--data", "usermodels:images", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["lock", "--check", "--device", "cuda", "--release", "2.11.0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("0 of 3 locked convention(s) changed from torch 2.13.0 to torch 2.11.0 cuda (compared: 1 by report "
            "cell, 0 by prediction, 0 by live measurement; 2 not compared)") in out, out
    assert ": torch.Tensor.clamp (x.clamp(min=0.0, max=6.0) at x=0.0, float32): not compared: no catalog case " \
           "holds this program at this point" in out, out


def test_a_lock_checked_at_a_lower_x86_64_level_compares_the_reports_capped_cells(models, capsys):
    """Issue 49: --isa x86-64-v3 --release 2.15.0 checks the lock against the report's cells of torch 2.15.0 measured
    as a CPU without AVX-512 (the shard probed under that cap): the CNN's relu keeps 0 there."""
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:cnn", "--data", "usermodels:images", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["lock", "--check", "--isa", "x86-64-v3", "--release", "2.15.0", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert ("0 of 3 locked convention(s) changed from torch 2.13.0 to torch 2.15.0 cpu at x86-64-v3 (compared: 1 by "
            "report cell, 0 by prediction, 0 by live measurement; 2 not compared)") in out, out
    assert "not compared: no catalog case holds this program at this point, so the report has no cpu at x86-64-v3 " \
           "cell of it" in out, out


def test_a_convention_the_gpu_changes_is_a_change_and_says_whose_doing(models, capsys):
    """A site of ``torch.kthvalue(v, 2).values`` at the tie [1, 0, 1, 0], locked with the report's CPU cell of
    torch 2.13.0: on CUDA (torch 2.11.0, the report's H200 shard) the gradient goes to the first tied element,
    on the CPU of 2.11.0 to the last, as in the lock: the device changes it."""
    from kinkcheck.report.query import lookup

    program, case = "torch.kthvalue(v, 2).values", "kthvalue@[1,0,1,0]"
    (cell,) = lookup(program, case=case, release="2.13.0", dtype="float32", device="cpu")
    site = lock.LockedSite(index=0, operation="torch.kthvalue", call="usermodels.py:9", kink="tie", dtype="float32",
                           hits=2, elements=4, program=program, at="v=[1.0,0.0,1.0,0.0]", case=case,
                           status=cell.status, value=cell.value, labels=list(cell.labels), source="report")
    lock.write_lock(lock.Lock(schema=lock.SCHEMA, framework="torch", release="2.13.0", device="cpu",
                              model="usermodels:clamped", data="usermodels:rows", written_by="a test", site=[site]),
                    models / "kinkcheck.lock")
    assert cell.value == {"v": [0.0, 0.0, 0.0, 1.0]}, cell
    assert main(["lock", "--check", "--device", "cuda", "--release", "2.11.0", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert ("usermodels.py:9: torch.kthvalue (torch.kthvalue(v, 2).values at v=[1.0,0.0,1.0,0.0], float32): "
            "[0, 0, 0, 1] (last) in torch 2.13.0 → [0, 1, 0, 0] (first) in 2.11.0 cuda (on the CPU 2.11.0 gives "
            "[0, 0, 0, 1] (last): the device changes it); read ") in out, out
    assert "1 of 1 locked convention(s) changed from torch 2.13.0 to torch 2.11.0 cuda" in out, out


def test_a_tie_at_plus_zero_is_not_the_signed_zero_case():
    """``maximum@-0.0`` is the tie at (-0.0, 0.0): a model's tie at (+0, +0) is no catalog case (measured live)."""
    assert lock._catalog_case("torch", "torch.maximum(x, y)", {"x": -0.0, "y": 0.0}) == "maximum@-0.0"
    assert lock._catalog_case("torch", "torch.maximum(x, y)", {"x": 0.0, "y": 0.0}) is None


def test_a_check_whose_model_does_not_load_still_checks_and_says_why_no_size(models, capsys):
    """The conventions are checked without the model; only the size of a change on the batch needs it."""
    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--quiet"]) == 0
    path = models / "kinkcheck.lock"
    path.write_text(path.read_text().replace('model = "usermodels:clamped"', 'model = "nosuchmod:make"'))
    capsys.readouterr()
    assert main(["lock", "--check", "--release", "2.14.1", "--quiet"]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "its size on your batch is not measured: the lock's model or data (nosuchmod:make, usermodels:rows) " \
           "does not load here (" in last and "CensusError" not in last, last


def test_report_only_compares_without_making_an_environment(models, capsys, monkeypatch):
    """--report-only: the CNN's relu is compared with torch 2.14.1's report cell; its pool and clamp, which the report
    has no cell for, with the rules' prediction for 2.14.1 (the clamp's rule changed there: 1 → 0), never measured in
    a 5.5 GB environment of 2.14.1."""
    import subprocess

    _installed_2_13_0()
    assert main(["lock", "--model", "usermodels:cnn", "--data", "usermodels:images", "--quiet"]) == 0
    capsys.readouterr()

    def no_install(*args, **kwargs):
        raise AssertionError(f"--report-only makes no environment and runs no probe: {args}")

    monkeypatch.setattr(subprocess, "run", no_install)
    assert main(["lock", "--check", "--release", "2.14.1", "--report-only", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert ("1 of 3 locked convention(s) changed from torch 2.13.0 to 2.14.1 (compared: 1 by report cell, 2 by "
            "prediction, 0 by live measurement)") in out, out
    assert (": torch.Tensor.clamp (x.clamp(min=0.0, max=6.0) at x=0.0, float32): 1 (right) in torch 2.13.0 → 0 in "
            "2.14.1 (predicted from the rules, not measured: torch.clamp at max at a bound: left") in out, out
    assert not (models / "ask" / "envs").exists(), "no environment made"


def test_a_reductions_changed_tie_says_how_far_it_moves_the_first_layer(models, capsys):
    """The max over two tied units (2 = 2 for the row [2, 2, 5]): a lock whose amax convention is ``first`` ([1, 0],
    as ``torch.max(v, dim).values`` gives), checked against the installed amax's split-even [0.5, 0.5]. The first
    weight's gradient goes from rows [2, 2, 5], [0, 0, 0] to [1, 1, 2.5] twice: |Δ| up to 2.5, largest entry 5."""
    assert main(["lock", "--model", "usermodels:maxed", "--data", "usermodels:tied_rows", "--quiet"]) == 0
    written = lock.read_lock(models / "kinkcheck.lock")
    (site,) = written.site
    assert (site.operation, site.program, site.at, site.value) == (
        "torch.amax", "torch.amax(v, dim=-1)", "v=[2.0,2.0]", {"v": [0.5, 0.5]}), site
    first = msgspec.structs.replace(site, value={"v": [1.0, 0.0]}, labels=["first", "in-clarke"])
    lock.write_lock(msgspec.structs.replace(written, site=[first]), models / "kinkcheck.lock")
    capsys.readouterr()
    assert main(["lock", "--check", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "on your first batch the first layer's gradient moves by up to 2.5 (its largest entry: 5)" in out, out


def test_a_pools_changed_tie_says_how_far_it_moves_the_first_layer(models, capsys):
    """One 2x2 window whose four elements tie at 1: the installed torch sends the window's gradient to one element
    (the lock records which); a lock that says the last element gets it instead moves the first weight's gradient
    from the row of that element to the other: rows are the input [1, 2, 3, 4] times the element's share, so
    |Δ| up to 4, largest entry 4 (unless the installed release already picks the last: then nothing changes)."""
    assert main(["lock", "--model", "usermodels:pooled", "--data", "usermodels:pool_rows", "--quiet"]) == 0
    written = lock.read_lock(models / "kinkcheck.lock")
    (site,) = written.site
    assert site.program.startswith("torch.nn.functional.max_pool2d(v, 2") and site.status == "ok", site
    grid = [g for row in site.value["v"][0] for g in row]
    assert sorted(grid) == [0.0, 0.0, 0.0, 1.0], f"the installed torch gives the window's gradient to one element: {grid}"
    last = msgspec.structs.replace(site, value={"v": [[[0.0, 0.0], [0.0, 1.0]]]}, labels=["last", "in-clarke"])
    lock.write_lock(msgspec.structs.replace(written, site=[last]), models / "kinkcheck.lock")
    capsys.readouterr()
    if grid[-1] == 1.0:
        pytest.skip("the installed torch already gives the last element the gradient: no change to measure")
    assert main(["lock", "--check", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "on your first batch the first layer's gradient moves by up to 4 (its largest entry: 4)" in out, out


def test_an_eval_lock_is_checked_in_eval_mode_and_a_tuple_output_is_summed(models, capsys):
    """--eval is written into the lock, and the check's batch shift runs the model in eval mode: there the batch
    norm passes h through (1/sqrt(1 + 1e-5)), h[0, 0] = 0 sits on the ReLU's kink, and a lock that says 1 there
    moves the first weight's gradient by x[0, 1] ≈ 1 (largest entry ≈ 2). The model returns a tuple: the loss is
    the sum of its float tensors."""
    assert main(["lock", "--model", "usermodels:normed", "--data", "usermodels:normed_rows", "--eval", "--quiet"]) == 0
    written = lock.read_lock(models / "kinkcheck.lock")
    assert written.eval, "eval mode is part of the lock"
    (site,) = written.site
    edited = msgspec.structs.replace(site, value={"x": 1.0}, labels=["right", "in-clarke"])
    lock.write_lock(msgspec.structs.replace(written, site=[edited]), models / "kinkcheck.lock")
    capsys.readouterr()
    assert main(["lock", "--check", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "on your first batch the first layer's gradient moves by up to 1 (its largest entry: 2)" in out, out


def test_a_site_is_asked_where_the_model_first_reached_its_kink(models):
    """The first batch ties nothing; the second ties maximum(h, 1) at 1 and amax over (1, 1): the questions are asked
    there (x = y = 1 is the catalog's maximum@tie, from the report), not at a point the model never reached."""
    made = lock.make_lock("usermodels:maximum", "usermodels:later_ties", quiet=True)
    by_op = {s.operation: s for s in made.site}
    tie = by_op["torch.maximum"]
    assert (tie.program, tie.at, tie.case, tie.source) == (
        "torch.maximum(x, y)", "x=1.0,y=1.0", "maximum@tie", "report"), tie
    assert by_op["torch.amax"].at == "v=[1.0,1.0]", by_op["torch.amax"]


def test_report_only_does_not_say_nothing_changes_of_what_it_did_not_compare(models, capsys, monkeypatch):
    """The clamp is compared with its report cell; the remainder, which the rules do not predict, is not compared."""
    _nothing_measured(monkeypatch)
    _write(models, CLAMP_SITE, JUMP_SITE)
    assert main(["lock", "--check", "--release", "2.13.0", "--report-only", "--quiet"]) == 0
    out = capsys.readouterr().out
    last = out.strip().splitlines()[-1]
    assert last.endswith(": none of the 1 compared changes; the 1 not compared are unknown"), last
    assert "nothing the model relies on changes" not in last, last
    assert "the rules do not predict it (not predicted: " in out, out


# --------------------------------------------------------------------------- a guard never passes on what it did not check

#: A site the report has a cell of (relu@0, torch 2.13.0's convention), and one no catalog case holds.
CLAMP_SITE = lock.LockedSite(index=0, operation="torch.Tensor.clamp", call="model.py:7", kink="x at a bound",
                             dtype="float32", hits=1, elements=8, program="x.clamp(min=0)", at="x=0.0", case="relu@0",
                             status="ok", value={"x": 1.0}, labels=["right", "in-clarke"], source="report")
OWN_SITE = lock.LockedSite(index=1, operation="torch.Tensor.clamp", call="model.py:9", kink="x at a bound",
                           dtype="float32", hits=1, elements=8, program="x.clamp(min=0.0, max=6.0)", at="x=0.0",
                           status="ok", value={"x": 1.0}, labels=["right"], source="measured")
#: A site no catalog case holds that the rules predict: torch.clamp's rule at its upper bound is ``right`` up to
#: torch 2.13.0 and ``left`` from 2.14.1 (``kinkcheck rules torch.clamp``), so 2 here, 0 from 2.14.1.
SCALED_SITE = lock.LockedSite(index=2, operation="torch.clamp", call="model.py:11", kink="x at a bound",
                              dtype="float32", hits=1, elements=8, program="torch.clamp(x, 0.0, 1.0) * 2.0",
                              at="x=0.0", status="ok", value={"x": 2.0}, labels=["right"], source="measured")
#: A site the rules do not predict (no rule for torch.remainder at its jump).
JUMP_SITE = lock.LockedSite(index=3, operation="torch.remainder", call="model.py:13", kink="x at a jump",
                            dtype="float32", hits=1, elements=8, program="torch.remainder(x, 1.0)", at="x=1.0",
                            status="ok", value={"x": 1.0}, labels=["derivative"], source="measured")


def _write(folder, *sites, unlocked=()):
    lock.write_lock(lock.Lock(schema=lock.SCHEMA, framework="torch", release="2.13.0", device="cpu",
                              model="usermodels:clamped", data="usermodels:rows", written_by="a test",
                              site=list(sites), unlocked=list(unlocked)), folder / "kinkcheck.lock")


def _nothing_measured(monkeypatch):
    from kinkcheck.answers import ask

    def measure(*args, **kwargs):
        raise AssertionError(f"nothing is measured in place of a report that cannot be read: {args}")

    monkeypatch.setattr(ask, "measure", measure)


@pytest.mark.parametrize("mode", [
    ["--release", "2.14.1"],
    ["--release", "2.14.1", "--report-only"],
    ["--framework-version", "jax==0.4.30"],
    ["--device", "cuda", "--release", "2.11.0"],
    ["--isa", "x86-64-v3", "--release", "2.15.0"],
], ids=["release", "report-only", "framework-version", "device", "isa"])
@pytest.mark.parametrize("fault", FAULTS)
def test_every_check_mode_stops_in_one_line_on_a_damaged_or_mixed_report(models, capsys, monkeypatch, faulty_report,
                                                                          fault, mode):
    """Issue 44, items 6 and 7: a damaged table gave a traceback in all three --check modes, and an unreadable one
    made `--release 2.14.1` say "no cell" and start a 5.5 GB torch install. Each mode now stops first: one line
    naming the table, exit 2, nothing measured, no comparison printed."""
    from damage import SAYS

    folder = faulty_report(fault)
    monkeypatch.setenv("KINKCHECK_REPORTS", str(folder))
    _nothing_measured(monkeypatch)
    _write(models, CLAMP_SITE, OWN_SITE)
    assert main(["lock", "--check", *mode, "--quiet"]) == 2, f"{fault} {mode}: exit 2"
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, f"{fault} {mode}: one line: {err}"
    assert str(folder / "observations.parquet") in lines[0] and SAYS[fault] in lines[0], \
        f"{fault} {mode}: the line names the table and what is wrong with it: {lines[0]}"
    assert out == "", f"{fault} {mode}: nothing compared, nothing printed: {out}"


def test_writing_a_lock_stops_on_a_damaged_report_before_running_the_model(models, capsys, monkeypatch, faulty_report):
    monkeypatch.setenv("KINKCHECK_REPORTS", str(faulty_report("garbage-json")))
    _nothing_measured(monkeypatch)
    assert main(["lock", "--model", "usermodels:clamped", "--data", "usermodels:rows", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "a value cell is not a JSON object" in err and len(err.strip().splitlines()) == 1, err
    assert not (models / "kinkcheck.lock").exists(), "no lock written from a report that cannot be read"


@pytest.mark.parametrize("mode, sites, why", [
    (["--framework-version", "jax==0.4.30"], [OWN_SITE],
     "none of the 1 locked site(s) was compared with jax 0.4.30 (each line above says why)"),
    (["--release", "2.14.1", "--report-only"], [JUMP_SITE],
     "none of the 1 locked site(s) was compared with torch 2.14.1 (each line above says why), so nothing is known "
     "of the conventions the model relies on there; without --report-only they are measured in that release's "
     "environment"),
    (["--device", "cuda", "--release", "2.11.0"], [OWN_SITE], "none of the 1 locked site(s) was compared with torch "
                                                               "2.11.0 cuda"),
    (["--release", "2.14.1"], [], "the lock holds no locked site, so nothing was compared with torch 2.14.1"),
], ids=["framework-version", "report-only", "device", "no-site"])
def test_a_check_that_compared_nothing_exits_2_and_says_why(models, capsys, monkeypatch, mode, sites, why):
    """Issue 44, item 7: `--framework-version jax==0.4.30` and `--report-only` exited 0 having compared nothing, so a
    CI job passed. A check that compares no site exits 2: each site's line says why it was not compared (stdout),
    and one line on stderr says that nothing was."""
    _nothing_measured(monkeypatch)
    _write(models, *sites)
    assert main(["lock", "--check", *mode, "--quiet"]) == 2, f"{mode}: compared nothing, exit 2"
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and why in lines[0] and "Traceback" not in err, f"{mode}: {err}"
    said = [ln for ln in out.splitlines() if ": not compared: " in ln]
    assert len(said) == len(sites), f"{mode}: a line for each site not compared: {out}"
    assert "nothing the model relies on changes" not in out, out


# --------------------------------------------------------------------------- predicted from the rules (issue 45)


def _measured_live(monkeypatch):
    """Record what is measured live and stop there (a release's environment would be made next): one line, exit 2."""
    from kinkcheck.answers import ask
    from kinkcheck.errors import UsageError

    calls = []

    def measure(questions, releases, **kwargs):
        calls.append(([q.expr for q in questions], list(releases)))
        raise UsageError(f"measured live in {releases} (the test stops here)")

    monkeypatch.setattr(ask, "measure", measure)
    return calls


@pytest.mark.parametrize("release, status, new, summary", [
    ("2.15.0", 1,
     "2 (right) in torch 2.13.0 → 0 in 2.15.0 (predicted from the rules, not measured: torch.clamp at max at a "
     "bound: left", "1 of 1 locked convention(s) changed from torch 2.13.0 to 2.15.0 (compared: 0 by report cell, 1 by "
             "prediction, 0 by live measurement); "),
    ("2.11.0", 0, None, "0 of 1 locked convention(s) changed from torch 2.13.0 to 2.11.0 (compared: 0 by report "
                        "cell, 1 by prediction, 0 by live measurement): nothing the model relies on changes (by the "
                        "rules' prediction for 1 of them, not measured)"),
])
@pytest.mark.parametrize("only", [[], ["--report-only"]], ids=["default", "report-only"])
def test_a_site_no_catalog_case_holds_is_compared_with_the_rules_prediction(models, capsys, monkeypatch, release,
                                                                             status, new, summary, only):
    """Issue 45: `torch.clamp(x, 0.0, 1.0) * 2.0` at 0 is no catalog case, so the report has no cell of it in any
    release; checked against a release that is not installed it is compared with the rules' prediction for that
    release (2 up to 2.13.0, 0 from 2.14.1), marked predicted, and no environment is made."""
    from kinkcheck.probe.ondemand import installed_release

    if installed_release("torch") == release:
        pytest.skip(f"torch {release} is installed here: it is measured live, not predicted")
    calls = _measured_live(monkeypatch)
    _write(models, SCALED_SITE)
    assert main(["lock", "--check", "--release", release, *only, "--quiet"]) == status, capsys.readouterr()
    out = capsys.readouterr().out
    assert calls == [], f"nothing measured live: {calls}"
    assert not (models / "ask" / "envs").exists(), "no environment made"
    if new is not None:
        assert f"model.py:11: torch.clamp (torch.clamp(x, 0.0, 1.0) * 2.0 at x=0.0, float32): {new}" in out, out
    else:
        assert "→" not in out, out
    assert summary in out.strip().splitlines()[-1], out


def test_a_prediction_that_misses_the_locked_value_is_no_comparison(models, capsys, monkeypatch):
    """A guard never passes (nor fails) on a prediction the lock's own release contradicts: when the rules' value for
    the release the lock was written in is not the locked value (the program is not what its operations' rules
    compose to), their value for another release is no comparison. With --report-only the site is not compared,
    and the check, having compared nothing, exits 2 (a fresh reader saw "changed from torch 2.13.0 to 2.13.0")."""
    calls = _measured_live(monkeypatch)
    odd = msgspec.structs.replace(SCALED_SITE, value={"x": 5.0})  # the rules predict 2 for 2.13.0
    _write(models, odd)
    assert main(["lock", "--check", "--release", "2.15.0", "--report-only", "--quiet"]) == 2, capsys.readouterr()
    captured = capsys.readouterr()
    assert "the rules predict 2 in the lock's own release 2.13.0" in captured.out + captured.err, captured
    assert "→" not in captured.out, f"no change is claimed from a prediction the rules miss: {captured.out}"
    assert calls == [], f"--report-only measures nothing: {calls}"


def test_measure_or_an_unpredicted_program_is_measured_in_that_releases_environment(models, capsys, monkeypatch):
    """A program the rules do not predict (torch.remainder at its jump) is measured live in the release checked, as
    before predictions, and only it: the predicted clamp is not. --measure measures every site without a report
    cell instead of predicting it; with --report-only it is bad input."""
    calls = _measured_live(monkeypatch)
    _write(models, SCALED_SITE, JUMP_SITE)
    assert main(["lock", "--check", "--release", "2.15.0", "--quiet"]) == 2
    assert calls == [(["torch.remainder(x, 1.0)"], ["2.15.0"])], calls
    assert "measured live in ['2.15.0']" in capsys.readouterr().err
    calls.clear()
    assert main(["lock", "--check", "--release", "2.15.0", "--measure", "--quiet"]) == 2
    assert calls == [(["torch.clamp(x, 0.0, 1.0) * 2.0", "torch.remainder(x, 1.0)"], ["2.15.0"])], calls
    capsys.readouterr()
    assert main(["lock", "--check", "--release", "2.15.0", "--measure", "--report-only", "--quiet"]) == 2
    assert "--report-only or --measure, not both" in capsys.readouterr().err


def test_a_locked_prediction_round_trips_and_one_that_differs_from_the_measurement_is_said(models, capsys,
                                                                                         monkeypatch):
    """Writing a lock records, beside the installed release's measurement of a site with no report cell, what the rules
    predict for that release ([site.predicted], marked); a prediction that differs from the measurement is a note on
    stderr, and the lock keeps the measurement. An old lock, without it, reads as before."""
    scaled = msgspec.structs.replace(SCALED_SITE, predicted=lock.Predicted(value={"x": 0.0}, rules=[
        lock.UsedRule(operation="torch.clamp", kind="max at a bound", labels=["left"])]))
    jump = msgspec.structs.replace(JUMP_SITE, predicted=lock.Predicted(reason="not predicted: no rule for it"))
    _write(models, CLAMP_SITE, scaled, jump)
    text = (models / "kinkcheck.lock").read_text()
    assert text.count("[site.predicted]  # predicted from the rules, not measured") == 2, text
    assert 'schema = "kinkcheck/lock/v1"' in text, text
    held = lock.read_lock(models / "kinkcheck.lock")
    assert [s.predicted for s in held.site] == [None, scaled.predicted, jump.predicted], held.site
    broken = text.replace('reason = "not predicted: no rule for it"', 'value = { "v" = 1.0 }')
    (models / "kinkcheck.lock").write_text(broken)
    with pytest.raises(lock.UsageError, match="predicted .* is not a gradient of the inputs"):
        lock.read_lock(models / "kinkcheck.lock")

    def census(model, data, batches, eval_mode):
        from types import SimpleNamespace

        return "torch", [SimpleNamespace(index=2, program="torch.clamp", call="model.py:11", kink="x at a bound",
                                         dtype="float32", hits=1, elements=8, question=SCALED_SITE.program,
                                         at=SCALED_SITE.at, inspected=True)], None

    def conventions(framework, release, wanted, **kwargs):
        return {k: ("ok", {"x": 2.0}, ["right"], "measured", None) for k in wanted}

    def predicted(framework, release, wanted):
        return {k: scaled.predicted for k in wanted}

    import kinkcheck.probe.userhits

    monkeypatch.setattr(kinkcheck.probe.userhits, "user_census", census)
    monkeypatch.setattr(lock, "conventions", conventions)
    monkeypatch.setattr(lock, "predicted", predicted)
    made = lock.make_lock("m:f", "m:d", quiet=True)
    (site,) = made.site
    assert (site.value, site.source, site.predicted) == ({"x": 2.0}, "measured", scaled.predicted), site
    err = capsys.readouterr().err
    assert "model.py:11: torch.clamp (torch.clamp(x, 0.0, 1.0) * 2.0 at x=0.0, float32): measured 2 (right) in " \
           "torch" in err and "but the rules predict 0 (torch.clamp at max at a bound: left)" in err, err


EXITS = textwrap.dedent('''
    import sys

    import torch


    def model():
        return torch.nn.Linear(3, 4)


    def exits_model():
        sys.exit(0)


    def exits_data():
        sys.exit(0)


    def exits_in_batches():
        yield torch.zeros(2, 3)
        sys.exit(0)


    class Leaving(torch.nn.Module):
        def forward(self, x):
            sys.exit(0)


    def leaving():
        return Leaving()


    def rows():
        return [torch.zeros(2, 3)]
''')


@pytest.mark.parametrize("model, data, why", [
    ("exiting:model", "exiting:exits_data", "--data exiting:exits_data called sys.exit(0)"),
    ("exiting:exits_model", "exiting:rows", "--model exiting:exits_model called sys.exit(0)"),
    ("exiting:model", "exiting:exits_in_batches", "--data exiting:exits_in_batches (batch 2) called sys.exit(0)"),
    ("exiting:leaving", "exiting:rows", "the model's forward pass (batch 1) called sys.exit(0)"),
], ids=["data", "model", "batches", "forward"])
def test_user_code_that_calls_sys_exit_is_one_line_and_no_lock(tmp_path, monkeypatch, capsys, model, data, why):
    """Issue 44, item 7: a --data factory that called sys.exit(0) made `lock` exit 0 with no output and no lock
    written. SystemExit from the user's code is caught: one line, exit 2."""
    _user_module(tmp_path, monkeypatch, "exiting", EXITS)
    assert main(["lock", "--model", model, "--data", data, "--batches", "2", "--quiet"]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and why in lines[0], f"{model} {data}: {err}"
    assert not (tmp_path / "kinkcheck.lock").exists(), "no lock written"


def test_a_module_that_calls_sys_exit_on_import_is_one_line(tmp_path, monkeypatch, capsys):
    _user_module(tmp_path, monkeypatch, "leaves", "import sys\nsys.exit(0)\n")
    assert main(["lock", "--model", "leaves:model", "--data", "leaves:rows", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--model: cannot import leaves: it called sys.exit(0) on import" in err and \
        len(err.strip().splitlines()) == 1, err
