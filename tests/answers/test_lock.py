"""``kinkcheck lock`` (issue 34, items 2, 3 and 5): a model's conventions locked, checked against another release."""

from __future__ import annotations

import sys
import textwrap

import msgspec
import pytest
from locking import MODELS, installed_2_13_0, user_module

from kinkcheck.answers import lock
from kinkcheck.cli import main

torch = pytest.importorskip("torch", reason="the models locked here are PyTorch modules")


def test_a_clamp_locked_under_2_13_0_fails_against_2_14_1_and_passes_against_2_13_0(models, capsys):
    installed_2_13_0()
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
    installed_2_13_0()
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

    installed_2_13_0()
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lock.md").read_text()
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

    user_module(tmp_path, monkeypatch, "jaxmodel", JAX_MODEL)
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
    installed_2_13_0()
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
    installed_2_13_0()
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
    installed_2_13_0()
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
    user_module(tmp_path, monkeypatch, "jaxcnn", JAX_CNN)
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
