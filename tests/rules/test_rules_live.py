"""Predictions of programs the catalog lacks, checked against the installed framework measured live
(kinkcheck.rules.answer with the committed reports/rules.json.gz; torch and JAX of the test environment), at kinks
of bounds, ties, reductions and jumps, and through the faces (ask, grad, rules)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from kinkcheck.language import expr as ex
from kinkcheck.catalog import find
from kinkcheck.probe.ondemand import installed_release
from kinkcheck.rules import answer, store
from kinkcheck.vocabulary import flat_value

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "reports" / store.FILE

#: (program, point, what kink it exercises); none of them is a catalog program at its point.
TORCH = [
    ("torch.sign(x) * torch.log(torch.abs(x) + torch.sqrt(x * x + 1))", {"x": 0}, "jump and abs under a 0 cotangent"),
    ("torch.relu(2.0 * x - 1.0) * 3.0", {"x": 0.5}, "a bound inside a composition"),
    ("torch.clamp(x * x - 1.0, -1.0, 0.0) + x", {"x": 1}, "clamp's upper bound after a square"),
    ("torch.amax(v * 2.0, 0) + torch.relu(v).sum()", {"v": [1, 1, 0]}, "a tied reduction and a bound"),
    ("torch.floor(x) * x", {"x": 1}, "a jump"),
    ("torch.maximum(x, y) - torch.minimum(x, y)", {"x": 1, "y": 1}, "two ties of two inputs"),
]
JAX = [
    ("jax.nn.relu(x) + jax.numpy.abs(x)", {"x": 0}, "a bound and abs at 0"),
    ("jax.numpy.max(v * 2.0)", {"v": [1, 1, 0]}, "a tied reduction"),
    ("jax.numpy.clip(x * 2.0, 0.0, 1.0)", {"x": 0.5}, "clip's upper bound"),
    ("jax.numpy.maximum(x, 0.0) + jax.numpy.maximum(2.0 * x, 0.0)", {"x": 0}, "two bounds"),
    ("jax.numpy.floor(x) * x", {"x": 1}, "a jump"),
]


def _check(adapter, framework: str, program: str, at: dict, what: str) -> None:
    assert find(framework, ex.unparse(ex.parse(program, at, {framework})), at) is None, \
        f"{program} at {at} is a catalog program: the test must ask about one the catalog lacks"
    release = installed_release(framework)
    got = answer.predictions(program, at, framework, releases=[release], report=RULES.parent)
    if not got["predicted"]:
        pytest.skip(f"the rules file holds no {framework} {release} (the installed release): {got['reason']}")
    p = got["predicted"][0]
    assert p["value"] is not None, f"{program} at {at} ({what}): {p['reason']}"
    measured = flat_value(adapter.gradient(ex.parse(program, at, {framework}), at))
    want = flat_value(p["value"])
    same = all((math.isnan(a) and math.isnan(b)) or abs(a - b) <= 1e-12 for a, b in zip(measured, want))
    assert same and len(measured) == len(want), (
        f"{framework} {release}: {program} at {at} ({what}) measured {measured}, predicted {want} by {p['rules']}")


@pytest.mark.parametrize(("program", "at", "what"), TORCH, ids=[t[0] for t in TORCH])
def test_torch_predictions_equal_the_installed_release(torch_adapter, program, at, what) -> None:
    _check(torch_adapter, "torch", program, at, what)


@pytest.mark.parametrize(("program", "at", "what"), JAX, ids=[t[0] for t in JAX])
def test_jax_predictions_equal_the_installed_release(jax_adapter, program, at, what) -> None:
    _check(jax_adapter, "jax", program, at, what)


def test_a_program_without_a_rule_says_not_predicted() -> None:
    got = answer.predictions("torch.nn.functional.glu(v)", {"v": [0, 0]}, "torch", report=RULES.parent)
    assert got["predicted"] == [] and got["reason"].startswith("not predicted: "), got


def _kinkcheck(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kinkcheck", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_rules_command_prints_an_operations_changes(tmp_path) -> None:
    if not RULES.is_file():
        pytest.skip("no reports/rules.json.gz")
    r = _kinkcheck("rules", "torch.clamp", "--report", str(RULES.parent), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "torch.clamp (torch) at min at a bound" in r.stdout and "from 2.14.1: right" in r.stdout, r.stdout
    j = _kinkcheck("rules", "clamp", "--framework", "torch", "--json", "--report", str(RULES.parent), cwd=tmp_path)
    doc = json.loads(j.stdout)
    assert any(x["operation"] == "torch.clamp" and x["since"] == "2.14.1" for x in doc["rules"]), doc
    tied = _kinkcheck("rules", "torch.clamp(min=tensor, max=tensor)", "--report", str(RULES.parent), cwd=tmp_path)
    assert "no rule in 1.13.1–2.13.0 (its cells there contradict each other" in tied.stdout, \
        f"releases with evidence but no rule are said, not hidden: {tied.stdout}"
    bad = _kinkcheck("rules", "torch.clampp", "--report", str(RULES.parent), cwd=tmp_path)
    assert bad.returncode == 2 and "no rule for 'torch.clampp'" in bad.stderr and "Traceback" not in bad.stderr, \
        bad.stderr


@pytest.mark.parametrize("spelling, operation", [
    ("torch.relu", "torch.nn.functional.relu"), ("F.relu", "torch.nn.functional.relu"),
    ("torch.Tensor.clamp", "torch.clamp"), ("jnp.maximum", "jax.numpy.maximum")])
def test_rules_reads_the_spellings_a_lock_or_a_program_uses(spelling, operation) -> None:
    """`kinkcheck rules` takes what `cite --rule` takes and what a lock line prints (torch.relu, torch.Tensor.clamp,
    the jnp and F aliases): the census's operation they are, never "no rule" (a fresh reader, stop 53)."""
    from kinkcheck.report.query import load_rules
    from kinkcheck.rules.names import resolve_operation

    if not RULES.is_file():
        pytest.skip("no reports/rules.json.gz")
    rules = load_rules(RULES.parent)["rules"]
    assert resolve_operation(rules, spelling)[1] == {operation}, spelling


def test_ask_all_predicts_every_release_without_making_an_environment(tmp_path) -> None:
    if not RULES.is_file():
        pytest.skip("no reports/rules.json.gz")
    env_home = tmp_path / "home"
    r = subprocess.run([sys.executable, "-m", "kinkcheck", "ask", "torch.relu(2.0 * x - 1.0) * 3.0", "--at", "x=0.5",
                        "--all", "--json", "--quiet", "--report", str(RULES.parent)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=600,
                       env={**__import__("os").environ, "KINKCHECK_ASK_HOME": str(env_home)})
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    releases = {p["release"] for p in doc["predicted"]}
    assert {"1.13.1", "2.13.0", "2.15.0"} <= releases, f"every measured release is predicted: {sorted(releases)}"
    assert all(p["value"] == {"x": 0.0} for p in doc["predicted"]), "relu'(0) = 0 in every torch release, times 2·3"
    assert not (env_home / "envs").exists() or not any((env_home / "envs").iterdir()), "no environment was made"


def test_grad_prints_the_prediction_of_its_release(tmp_path) -> None:
    if not RULES.is_file():
        pytest.skip("no reports/rules.json.gz")
    release = installed_release("torch")
    r = subprocess.run([sys.executable, "-m", "kinkcheck", "grad", "torch.relu(2.0 * x - 1.0) * 3.0", "--at",
                        "x=0.5"], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                       env={**__import__("os").environ, "KINKCHECK_REPORTS": str(RULES.parent)})
    assert r.returncode == 0, r.stderr
    line = next((x for x in r.stdout.splitlines() if x.startswith("predicted from the rules")), None)
    assert line is not None, r.stdout
    if f"torch {release}" not in line:
        pytest.skip(f"the rules file holds no torch {release}: {line}")
    assert "not measured" in line and ": 0 (torch.nn.functional.relu at max at a bound" in line, line
    assert "note: the measured value is not what the rules predict" not in r.stdout, r.stdout


def test_rules_command_refuses_a_missing_report_in_one_line(tmp_path) -> None:
    r = _kinkcheck("rules", "--report", str(tmp_path / "nothing-here"), cwd=tmp_path)
    assert r.returncode == 2 and "no such folder or file" in r.stderr and "Traceback" not in r.stderr, r.stderr
    if not RULES.is_file():
        return
    r = _kinkcheck("rules", "torch.clamp", "--framework", "jax", "--report", str(RULES.parent), cwd=tmp_path)
    assert r.returncode == 2 and "in jax (it has rules in torch)" in r.stderr, r.stderr
