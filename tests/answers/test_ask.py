"""``kinkcheck ask`` (issue 34, item 1): a program measured as the catalog's are, across releases, judged."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from kinkcheck.answers import ask
from kinkcheck.probe import ondemand
from kinkcheck.catalog import load_catalog
from kinkcheck.cli import main
from kinkcheck.errors import UsageError
from kinkcheck.registry import REGISTRY


@pytest.fixture()
def ask_home(tmp_path, monkeypatch):
    monkeypatch.setenv(ask.ENV_HOME, str(tmp_path / "ask"))
    return tmp_path / "ask"


def _one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert out == "" and len(lines) == 1 and "Traceback" not in err, f"one line on stderr, got {err!r}"
    return lines[0]


# --------------------------------------------------------------------------- the question


def test_a_question_takes_its_function_from_the_mapping():
    q = ask.question("x.clamp(min=0) * 2", "x=0", framework="torch")
    assert (q.framework, q.expr, q.at, q.case, q.tie) == ("torch", "x.clamp(min=0) * 2", {"x": 0}, None, False), q
    assert q.sympy == "2*Max(0, x)", q.sympy
    assert q.case_id.startswith("ask@") and q.digest != ask.question("torch.relu(x) * 2", "x=0").digest, \
        "another program is another question"
    assert q.digest == ask.question("x.clamp(min=0) * 2", "x = 0.0", framework="torch").digest, \
        "0 and 0.0 are one point: one question"
    assert ask.question("jax.numpy.abs(v).max() * 2", "v=[1,-1]").sympy == "2*Max(Abs(v[0]), Abs(v[1]))"


def test_a_catalog_program_at_its_point_is_that_case():
    """Its function and tie flag are the case's; the sign of zero tells relu@0 from relu@-0.0 (``-0`` too)."""
    q = ask.question("x.clamp(min=0)", "x=0", framework="torch")
    assert (q.case, q.case_id, q.sympy, q.tie) == ("relu@0", "relu@0", "Max(x, 0)", False), q
    assert ask.question("torch.clamp(x, min=0)", "x=-0").case == "relu@-0.0"
    tied = ask.question("torch.max(v)", "v=[1,1]")
    assert (tied.case, tied.tie) == ("max@[1,1]", True), tied
    assert ask.question("torch.maximum(x, y) * 3", "x=1,y=1", tie=True).tie, "--tie for a question of one's own"
    assert not ask.question("torch.clamp(x, min=0) * 3", "x=0", tie=True).tie, "one number against a constant: no tie"


def test_a_sympy_that_is_not_the_cases_function_is_refused_unless_live():
    with pytest.raises(UsageError, match="--sympy 'Min[(]x, 0[)]' is not the function of the catalog's case relu@0"):
        ask.question("torch.clamp(x, min=0)", "x=0", sympy_text="Min(x, 0)")
    for text in ("Max(0, x)", "Piecewise((x, x > 0), (0, True))", "(x + Abs(x))/2"):
        same = ask.question("torch.clamp(x, min=0)", "x=0", sympy_text=text)
        assert same.case == "relu@0", f"the case's function written another way is the case: {text}"
    with pytest.raises(UsageError, match="is not the function of the catalog's case relu@0"):
        ask.question("torch.clamp(x, min=0)", "x=0", sympy_text="Abs(x)")
    own = ask.question("torch.clamp(x, min=0)", "x=0", sympy_text="Min(x, 0)", live=True)
    assert (own.case, own.sympy) == (None, "Min(x, 0)"), own


@pytest.mark.parametrize("expr, at, kwargs, why", [
    ("torch.relu(x) + jax.nn.relu(x)", "x=0", {}, "mixes frameworks"),
    ("x.abs()", "x=0", {}, "cannot tell the framework from a method chain"),
    ("torch.relu(x)", "x=0,y=1", {}, "--at gives y but the expression does not use it"),
    ("torch.relu(x)", "x=nan", {}, "nan"),
    ("torch.relu(x)", "x=0", {"framework": "jax"}, "--framework jax but the expression uses ['torch']"),
    ("torch.special.zeta(x, 2.0)", "x=1", {}, "give its function with --sympy"),
    ("torch.relu(x)", "x=0", {"sympy_text": "Max(x,"}, ""),
    ("torch.relu(x) * 1e308 * 10.0", "x=0", {}, "is not a finite float64 number"),  # folded past float64
])
def test_bad_questions_are_one_line(expr, at, kwargs, why):
    with pytest.raises(UsageError, match=None) as info:
        ask.question(expr, at, **kwargs)
    assert why in str(info.value) and "\n" not in str(info.value), str(info.value)


@pytest.mark.parametrize("expr, framework", [("torch.relu(x)", "torch"), ("tf.nn.relu(x)", "tensorflow")])
def test_the_question_is_a_catalog_of_one_case(tmp_path, expr, framework):
    q = ask.question(expr, "x=0")
    catalog = load_catalog(q.write_catalog(tmp_path / "q"))
    (case,) = catalog.cases
    assert case.id == q.case_id and case.at == {"x": 0}, case
    assert [(p.framework, p.id) for p in case.programs] == [(framework, q.expr)], case.programs


# --------------------------------------------------------------------------- which releases


def test_releases_come_from_the_matrix_and_the_installed_one():
    matrix = list(REGISTRY["torch"].versions)
    assert ask.releases_asked("torch", every=True) == matrix, "--all: the matrix, oldest first"
    assert ask.releases_asked("torch", release=[matrix[-1], matrix[0]]) == [matrix[0], matrix[-1]], "sorted"
    newer = ask.releases_asked("torch", releases=">=2.13")
    assert newer and all(v.split(".")[:2] >= ["2", "13"] for v in newer) and newer[-1] == matrix[-1], newer
    installed = ask.installed_release("torch")
    if installed is None:
        pytest.skip("torch is not installed here: the default release is the installed one")
    assert ask.releases_asked("torch") == [installed], "by default, the installed release"


@pytest.mark.parametrize("kwargs, why", [
    ({"release": ["2.99.0"]}, "unknown release '2.99.0' of torch: kinkcheck asks the releases of its matrix"),
    ({"releases": "~~2"}, "--releases '~~2' is not a version specifier"),
    ({"releases": ">=99"}, "--releases '>=99' holds none of torch's releases"),
    ({"releases": " "}, "--releases is empty"),
])
def test_unknown_releases_are_refused(kwargs, why):
    with pytest.raises(UsageError) as info:
        ask.releases_asked("torch", **kwargs)
    assert why in str(info.value), str(info.value)


@pytest.mark.parametrize("argv, why", [
    (["ask", "torch.relu(x)", "--at", "x=0", "--release", "0.0.1"], "unknown release '0.0.1' of torch"),
    (["ask", "torch.relu(x)", "--at", "x=0", "--mode", "jit"], "torch has no mode 'jit'"),
    (["ask", "torch.relu(x)", "--at", "x=0", "--dtype", "float8"], "unknown dtype 'float8'"),
    (["ask", "torch.relu(x)", "--at", "x=0", "--disk-budget", "0"], "--disk-budget must be a finite number of GB above 0"),
    (["ask", "torch.relu(x)", "--at", "y=0"], "unknown name 'x' (inputs: y;"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_is_made(ask_home, capsys, argv, why):
    assert main(argv) == 2
    line = _one_error_line(capsys)
    assert why in line, line
    assert not ask_home.exists(), "nothing is written for bad input"


# --------------------------------------------------------------------------- the disk budget


def _env(envs, name, size, age):
    (envs / name).mkdir(parents=True)
    (envs / name / "own").write_bytes(os.urandom(size))
    (envs / name / ".last-used").touch()
    os.utime(envs / name / ".last-used", (time.time() - age, time.time() - age))


def test_the_least_recently_used_environments_go_first(tmp_path):
    envs = tmp_path / "envs"
    for name, age in (("torch-2.0.1", 0), ("torch-2.1.2", 100), ("torch-2.2.2", 50)):
        _env(envs, name, 100_000, age)
    assert 3 * 100_000 <= ondemand.disk_use(envs) < 3 * 110_000, "the files' blocks"
    ondemand.make_room(envs, 250_000, {envs / "torch-2.1.2"}, ondemand.Log(quiet=True))
    left = sorted(p.name for p in envs.iterdir())
    assert left == ["torch-2.0.1", "torch-2.1.2"], f"the oldest use not kept by this question goes: {left}"


def test_linked_files_count_once_and_the_cache_goes_first(tmp_path):
    """uv links one file of its cache into every virtualenv that installs it: the file is counted once, and
    removing a virtualenv frees only what no other link holds (the cache first: without it nothing is freed)."""
    envs = tmp_path / "envs"
    (envs / ".cache").mkdir(parents=True)
    shared = envs / ".cache" / "libtorch.so"
    shared.write_bytes(os.urandom(200_000))
    (envs / ".cache" / "stale.whl").write_bytes(os.urandom(50_000))  # a wheel no virtualenv links any more
    _env(envs, "torch-2.0.1", 20_000, 100)
    _env(envs, "torch-2.1.2", 20_000, 50)
    for name in ("torch-2.0.1", "torch-2.1.2"):
        os.link(shared, envs / name / "libtorch.so")
    total = ondemand.disk_use(envs)
    assert 290_000 <= total < 310_000, f"the shared file once, not three times: {total}"
    ondemand.make_room(envs, total, set(), ondemand.Log(quiet=True))
    assert sorted(p.name for p in envs.iterdir()) == [".cache", "torch-2.0.1", "torch-2.1.2"], "within budget"
    ondemand.make_room(envs, total - 10_000, set(), ondemand.Log(quiet=True))
    left = sorted(p.name for p in envs.iterdir())
    assert left == ["torch-2.0.1", "torch-2.1.2"], f"the cache goes first, and that is enough: {left}"
    ondemand.make_room(envs, 225_000, set(), ondemand.Log(quiet=True))
    left = sorted(p.name for p in envs.iterdir())
    assert left == ["torch-2.1.2"], f"then the least recently used; the shared file lives on in the other: {left}"
    assert ondemand.disk_use(envs) > 200_000, "still there: the other virtualenv links it"


# --------------------------------------------------------------------------- the report's cells


def _no_probe(*args, **kwargs):
    raise AssertionError(f"answered from the report's cells: nothing is installed or probed ({args})")


def test_a_catalog_program_is_answered_from_the_reports_cells(ask_home, capsys, monkeypatch):
    """The done-when question: torch.clamp(x, min=0) at 0 is a program of the catalog's relu@0, so the answer is
    the report's cells (measured by nox -s report, every mode and dtype), with nothing installed or probed."""
    import subprocess

    monkeypatch.setattr(subprocess, "run", _no_probe)
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--release", "2.13.0", "--release", "2.14.1"]) == 0
    out, _ = capsys.readouterr()
    assert "the catalog's case relu@0 (the report's cases/relu-at-0.md)\nthe report's cells: torch 2.13.0, 2.14.1 (" \
        in out, out
    assert "\n  2.13.0: 1 right\n  2.14.1: 0 left\n" in out, out
    assert "\n  RL  (R right, L left)\n" in out and "🔵" not in out and "🟦" not in out, \
        f"the strip in the site's letters, spelled out (a terminal may have no emoji font): {out}"
    assert "changed in torch 2.14.1 (from 2.13.0): 1 → 0 [reverse, functional, forward, forward-ad, inductor" in out, out
    assert not ask_home.exists(), "nothing kept: the report holds the answer"
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--all", "--mode", "inductor", "--dtype", "float32",
                 "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["sources"] == dict.fromkeys(REGISTRY["torch"].versions, "report"), answer["sources"]
    cells = {(o["environment"], o["mode"], o["dtype"]) for o in answer["report"]["observations"]}
    assert {(m, d) for _, m, d in cells} == {("inductor", "float32")}, "only the cells asked for"


def test_the_reports_case_is_the_one_at_the_point_sign_of_zero_included():
    for at, case in (("x=0", "relu@0"), ("x=-0.0", "relu@-0.0"), ("x=1e-45", "relu@1e-45")):
        shards = ask.from_report(ask.question("torch.clamp(x, min=0)", at), ["2.13.0"])
        assert shards is not None and {o["case"] for s in shards for o in s["observations"]} == {case}, (at, case)
        assert [s["environment"]["id"] for s in shards] == ["torch-2.13.0-cpu"], "the release asked, its provenance"
    assert ask.from_report(ask.question("torch.clamp(x, min=0) * 2", "x=0"), ["2.13.0"]) is None, \
        "a program the catalog lacks has no cells in the report"
    assert ask.from_report(ask.question("torch.clamp(x, min=0)", "x=0.5"), ["2.13.0"]) is None, \
        "nor has a catalog program at another point"


def test_releases_the_report_lacks_are_measured_here_and_joined(ask_home, capsys, monkeypatch):
    """A release whose cells the report lacks (here: the installed one, cut out of the report) is measured here;
    the answer joins both, and its changed-in runs across them."""
    version = _installed("torch")
    if version != "2.13.0":
        pytest.skip(f"the values asserted are torch 2.13.0's (installed: {version})")
    real = ask.from_report
    monkeypatch.setattr(ask, "from_report",
                        lambda q, releases, *a, **k: real(q, [r for r in releases if r != version], *a, **k))
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--release", "2.13.0", "--release", "2.14.1",
                 "--mode", "reverse", "--dtype", "float64"]) == 0
    out, err = capsys.readouterr()
    assert "the report's cells: torch 2.14.1 (" in out and "measured here: torch 2.13.0" in out, out
    assert "\n  2.13.0: 1 right\n  2.14.1: 0 left\n" in out, out
    assert "changed in torch 2.14.1 (from 2.13.0): 1 → 0 [reverse; float64]" in out, out
    assert "torch 2.13.0: not in the report's cells: measured here" in err, err


def test_the_next_environment_is_made_while_a_release_is_measured(ask_home, monkeypatch):
    """Release 1.7.0's environment is made while release 1.6.2 is probed (the probe of 1.6.2 sees it begin); the
    budget is checked before each environment is made, keeping the one measured and the next, and at the end. The
    installed release, which needs no environment, goes first."""
    import threading

    next_begun = threading.Event()
    seen, rooms, order = {}, [], []

    def environment(framework, version, root, log):
        order.append(version)
        if version == "1.7.0":
            next_begun.set()
        return sys.executable, {}

    def probe(got, framework, catalog_path, shard, modes, dtypes, timeout_s, log, version):
        seen[version] = next_begun.wait(timeout=10) if version == "1.6.2" else True
        return "not probed in this test"

    monkeypatch.setattr(ask, "environment", environment)
    monkeypatch.setattr(ask, "_probe", probe)
    monkeypatch.setattr(ask, "make_room", lambda envs, budget, keep, log: rooms.append(sorted(p.name for p in keep)))
    q = ask.question("autograd.numpy.maximum(x, y) * 3", "x=0,y=0")
    answer = ask.measure([q], ["1.6.2", "1.7.0"], dtypes=["float64"], quiet=True, live=True)
    assert seen == {"1.6.2": True, "1.7.0": True}, f"the next environment was begun during the probe: {seen}"
    assert answer.not_measured == dict.fromkeys(["1.6.2", "1.7.0"], "not probed in this test"), answer.not_measured
    assert rooms == [["autograd-1.6.2", "autograd-1.7.0"], ["autograd-1.7.0"]], rooms
    installed = ask.installed_release("autograd")
    if installed is None:
        pytest.skip("autograd is not installed here: no release goes first")
    order.clear()
    ask.measure([q], ["1.5", installed], dtypes=["float64"], quiet=True, live=True)
    assert order == [installed, "1.5"], f"the installed release first: {order}"


def test_the_progress_is_a_bar_on_a_terminal_and_lines_elsewhere(monkeypatch):
    import sys

    from rich.progress import Progress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    assert isinstance(ask._progress(False, 3), Progress), "a terminal: a bar of the releases"
    assert ask._progress(True, 3) is None and ask._progress(False, 0) is None, "--quiet, or nothing to measure"
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert ask._progress(False, 3) is None, "not a terminal: lines"


# --------------------------------------------------------------------------- measured for real


def _installed(framework: str) -> str:
    version = ask.installed_release(framework)
    if version is None:
        pytest.skip(f"{framework} is not installed here")
    return version


def test_ask_measures_the_installed_release_and_judges_it(ask_home, capsys, monkeypatch):
    version = _installed("torch")
    argv = ["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--mode", "reverse", "--mode", "functional",
            "--dtype", "float64", "--dtype", "float32", "--live"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "f = Max(x, 0): a kink" in out and "Clarke generalized gradient [0, 1], min-norm 0" in out, out
    assert f"{version}: 1 right" in out, out
    assert f"modes of torch {version}: reverse 1 right · functional 1 right" in out, out
    assert f"torch {version}: measuring reverse, functional, float64, float32" in err, err
    shards = list((ask_home / "questions").glob("*/shards/*.json"))
    assert [p.name for p in shards] == [f"torch-{version}-cpu.json"], shards

    import subprocess

    def no_probe(*args, **kwargs):
        raise AssertionError(f"a question asked before is answered from its shard: {args}")

    monkeypatch.setattr(subprocess, "run", no_probe)
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    answer = json.loads(out)
    assert answer["question"] == {"expr": "torch.clamp(x, min=0)", "at": {"x": 0}, "framework": "torch",
                                  "sympy": "Max(x, 0)", "case": "relu@0", "tie": False}, answer["question"]
    cells = {(o["mode"], o["dtype"]): (o["value"], o["labels"]) for o in answer["report"]["observations"]}
    assert cells[("reverse", "float64")] == ({"x": 1.0}, ["right", "in-clarke"]), cells
    assert len(cells) == 4, "two modes, two dtypes"
    assert "measured before" in err, err


def test_ask_across_releases_installs_an_environment_per_release(ask_home, capsys):
    """Another release of a light framework (autograd, pure Python) in a virtualenv of its own, beside the
    installed one: the answer holds both, each from its own environment."""
    installed = _installed("autograd")
    other = next((v for v in reversed(REGISTRY["autograd"].versions) if v != installed), None)
    assert other, "autograd's matrix has another release"
    rc = main(["ask", "autograd.numpy.maximum(x, y)", "--at", "x=0,y=0", "--release", installed, "--release", other,
               "--dtype", "float64", "--live"])
    out, err = capsys.readouterr()
    if f"autograd {other}: not measured: install failed" in err:
        pytest.skip(f"no package registry reachable here to install autograd {other}: {err.splitlines()[-1]}")
    assert rc == 0, err
    assert "f = Max(x, y): a kink" in out, out
    older, newer = sorted([installed, other], key=lambda v: tuple(map(int, v.split("."))))
    assert f"2 release(s) ({older} – {newer})" in out, out
    assert f"{older}, {newer}: x=0.5, y=0.5 min-norm" in out, f"autograd splits a tie evenly in both: {out}"
    env = ask_home / "envs" / f"autograd-{other}"
    assert (env / ".last-used").exists(), "the other release's environment is kept for the next question"
    shards = sorted(p.name for p in (ask_home / "questions").glob("*/shards/*.json"))
    assert shards == sorted([f"autograd-{installed}-cpu.json", f"autograd-{other}-cpu.json"]), shards
    provenance = json.loads(next((ask_home / "questions").glob(f"*/shards/autograd-{other}-cpu.json")).read_text())
    assert provenance["environment"]["framework_version"] == other, "measured in that release, not this one"


# --------------------------------------------------------------------------- --stage


@pytest.fixture()
def checkout(tmp_path):
    """A copy of the catalog and its program files, to stage beside."""
    import shutil
    from pathlib import Path

    refs = Path(__file__).resolve().parents[2] / "references"
    (tmp_path / "refs").mkdir()
    shutil.copy(refs / "catalog.toml", tmp_path / "refs" / "catalog.toml")
    shutil.copytree(refs / "programs", tmp_path / "refs" / "programs")
    return tmp_path / "refs" / "catalog.toml"


def test_stage_writes_a_draft_case_the_catalog_reads_and_promote_waits_for(checkout):
    from kinkcheck.catalog import CatalogError, DRAFT_REASON, forget_loaded, with_staged
    from kinkcheck.probe.staging import promote

    q = ask.question("tf.nn.relu6(x)", "x=6")
    written = ask.stage(q, "relu6-tf@6", checkout, title="relu6 at its upper kink")
    forget_loaded()
    catalog = with_staged(load_catalog(checkout))
    case = catalog.cases[-1]
    assert (case.id, case.title, case.at, case.sympy) == ("relu6-tf@6", "relu6 at its upper kink", {"x": 6},
                                                          q.sympy), case
    assert [(p.framework, p.id) for p in case.programs] == [("tensorflow", "tensorflow.nn.relu6(x)")], case.programs
    assert set(case.no_equivalent) == set(REGISTRY) - {"tensorflow"}, "every other framework: a draft reason"
    assert all(why.startswith(DRAFT_REASON) for why in case.no_equivalent.values()), case.no_equivalent
    assert len(written) == 1 + len(list((checkout.parent / "programs").glob("*.toml"))), written
    with pytest.raises(CatalogError, match="staged case relu6-tf@6 is a draft: write the program of autograd, jax"):
        promote(checkout, checkout.parent / "observations")


@pytest.mark.parametrize("case_id, why", [
    ("relu@0", "the catalog has a case relu@0; choose another id"),
    ("relu@minus-0.0", "reads as the catalog's relu@-0.0"),
    ("", "a case id is <function>@<point>"),
    ("my relu", "a case id is <function>@<point>"),
])
def test_stage_refuses_in_one_line_and_writes_nothing(checkout, case_id, why):
    q = ask.question("torch.relu(x)", "x=0")
    with pytest.raises(UsageError) as info:
        ask.stage(q, case_id, checkout)
    assert why in str(info.value) and "\n" not in str(info.value), str(info.value)
    assert not (checkout.parent / "staged").exists(), "nothing written"


@pytest.mark.parametrize("case_id, why", [
    ("relu" * 30 + "@0", "the id is 122 bytes long; a case id names the report's page files, so it is at most 100 bytes"),
    ("é" * 60 + "@0", "the id is 122 bytes long"),
    ("relu/x@0", "the id holds a path separator ('/')"),
    ("relu@0/1", "the id holds a path separator ('/')"),
    ("relu\\x@0", "the id holds a path separator ('\\\\')"),
    ("relu@0\0", "the id holds NUL ('\\x00')"),
    ("relu@0\x1b", "the id holds a control character"),
    (".relu@0", "the id starts or ends with a dot"),
    ("relu@0.", "the id starts or ends with a dot"),
    ("con@0", "'con' is a device name on Windows"),
    ("LPT1.a@0", "'LPT1' is a device name on Windows"),
    ("f@" + "-@" * 40, "its report page name would be 369 bytes long (at most 128)"),
])
def test_stage_refuses_an_id_that_cannot_name_a_file(checkout, case_id, why):
    """Issue 44, item 8: a staged id names the report's page files (cases/<slug>.md, .html); one that cannot (too
    long: "File name too long" at every later render; a separator, NUL, a leading dot, a reserved name) is refused
    in one line before anything is written."""
    q = ask.question("torch.relu(x)", "x=0")
    assert ask.stage_id_problem(case_id) is not None, f"{case_id!r} is refused"
    with pytest.raises(UsageError) as info:
        ask.stage(q, case_id, checkout)
    text = str(info.value)
    assert why in text and "\n" not in text and len(text) < 300, f"expected {why!r} in one short line: {text!r}"
    assert not (checkout.parent / "staged").exists(), "nothing written"


def test_stage_takes_the_longest_id_that_names_a_file(checkout):
    q = ask.question("torch.relu(x)", "x=0")
    longest = "r" * (ask.MAX_STAGE_ID_BYTES - 2) + "@0"
    assert ask.stage_id_problem(longest) is None, ask.stage_id_problem(longest)
    written = ask.stage(q, longest, checkout)
    assert written and all(p.is_file() for p in written), written


def test_ask_stage_with_an_id_too_long_is_one_line_and_exit_2(ask_home, capsys, tmp_path):
    catalog = tmp_path / "catalog.toml"
    assert main(["ask", "torch.relu(x)", "--at", "x=0", "--stage", "x" * 300 + "@0", "--catalog", str(catalog)]) == 2
    line = _one_error_line(capsys)
    assert "--stage 'xxxx" in line and "the id is 302 bytes long" in line and len(line) < 300, line
    assert not ask_home.exists() and not catalog.exists(), "nothing is written for bad input"
    assert main(["ask", "torch.relu(x)", "--at", "x=0", "--stage", "", "--catalog", str(catalog)]) == 2, \
        "an empty --stage is bad input, not staging silently turned off"
    assert "--stage needs an id" in _one_error_line(capsys)


def test_stage_needs_a_catalog_there(tmp_path):
    with pytest.raises(UsageError, match="--stage writes beside a checkout's catalog: no"):
        ask.stage(ask.question("torch.relu(x)", "x=0"), "relu-again@0", tmp_path / "catalog.toml")


def test_a_narrowed_question_answers_with_the_cells_asked(ask_home, capsys):
    """--mode forward --dtype float32: the answer shows those cells (no reverse-mode table of nothing), also when
    the shard measured before holds more."""
    version = _installed("torch")
    base = ["ask", "torch.abs(x)", "--at", "x=0", "--quiet", "--live"]
    assert main([*base, "--mode", "reverse", "--mode", "forward", "--dtype", "float64", "--dtype", "float32"]) == 0
    capsys.readouterr()
    assert main([*base, "--mode", "forward", "--dtype", "float32"]) == 0
    out = capsys.readouterr().out
    assert f"{version}, forward, float32: 0 " in out, out
    assert "reverse" not in out and "float64" not in out, f"only the cells asked: {out}"


def test_an_empty_home_is_refused(monkeypatch):
    monkeypatch.setenv(ask.ENV_HOME, " ")
    with pytest.raises(UsageError, match="KINKCHECK_ASK_HOME is empty"):
        ask.home()


def test_a_staged_id_is_not_staged_twice(checkout):
    q = ask.question("torch.relu(x)", "x=0")
    ask.stage(q, "relu-twice@0", checkout)
    before = (checkout.parent / "staged" / "catalog.toml").read_text()
    with pytest.raises(UsageError, match="--stage relu-twice@0: already staged in"):
        ask.stage(q, "relu-twice@0", checkout)
    assert (checkout.parent / "staged" / "catalog.toml").read_text() == before


def test_a_report_that_is_there_but_unreadable_is_one_line_not_a_measurement(ask_home, capsys, monkeypatch, tmp_path):
    """$KINKCHECK_REPORTS naming no report, or a broken reports/conventions.json here: one line and exit 2, as grad
    and cite say it; nothing measured (--live measures without the report)."""
    import subprocess

    monkeypatch.setattr(subprocess, "run", _no_probe)
    monkeypatch.setenv("KINKCHECK_REPORTS", str(tmp_path / "nowhere"))
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--release", "2.14.1"]) == 2
    assert "no report in" in _one_error_line(capsys)
    monkeypatch.delenv("KINKCHECK_REPORTS")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "conventions.json").write_text("{bad json")
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--release", "2.14.1"]) == 2
    line = _one_error_line(capsys)
    assert "reports/conventions.json" in line and "--live" in line, line
    assert not ask_home.exists(), "nothing measured, nothing kept"


def test_live_cells_of_a_tie_case_get_the_tie_labels(ask_home, capsys):
    """--live measures a catalog program here as its case: the case's tie flag, so the labels are the report's."""
    _installed("torch")
    argv = ["ask", "torch.max(v)", "--at", "v=[1,1]", "--mode", "reverse", "--dtype", "float64", "--json"]
    assert main(argv) == 0
    from_report = {o["labels"][0] for o in json.loads(capsys.readouterr().out)["report"]["observations"]}
    assert main([*argv, "--live", "--release", ask.installed_release("torch")]) == 0
    answer = json.loads(capsys.readouterr().out)
    labels = [o["labels"] for o in answer["report"]["observations"]]
    assert answer["sources"] == {ask.installed_release("torch"): "live"}, answer["sources"]
    assert labels == [["split-even", "min-norm", "in-clarke"]], labels
    assert from_report == {"split-even"}, from_report


def test_the_heading_names_the_dtype_shown(ask_home, capsys):
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--release", "1.13.1", "--dtype", "float16"]) == 0
    out = capsys.readouterr().out
    assert "(1.13.1); float16:\n" in out and "float64" not in out, out
    assert "torch 1.13.1+cu117 (added in 2.0)" in out and "<release>" not in out, "one release: named in its error"


def test_a_program_with_its_own_constants_is_asked_with_them(tmp_path):
    """tinygrad's x.selu() rounds λ (issue 44): the question carries its own function, and the question's catalog
    gives it to the report's judgement, so ask reads as the report does."""
    from kinkcheck.answers.ask import question
    from kinkcheck.catalog import load_catalog

    q = question("x.selu()", "x=0", "tinygrad")
    assert q.case == "selu@0" and q.own is not None and "λ = 1.0507" in q.own[1], q
    case = load_catalog(q.write_catalog(tmp_path)).case("selu@0")
    assert case.own_functions[("tinygrad", "x.selu()")].sympy == q.own[0], case.own_functions
    exact = question("x.selu(1.6732632423543772, 1.0507009873554805)", "x=0", "tinygrad")
    assert exact.own is None, "the program that passes the exact constants is judged by the case's function"


# --------------------------------------------------------------------------- --device cuda: the report's cells


def test_cuda_is_answered_from_the_reports_cuda_cells_not_measured_here(ask_home, capsys, monkeypatch):
    """Issue 46, item 4: ``ask --device cuda`` on a machine without a GPU answers from the report's CUDA cells
    (torch 2.11.0 on an H200: clamp's min=0 bound gives 1, right), marked "from the report; not measured here",
    with nothing installed or probed, and the rules' prediction for that release beside it."""
    import subprocess

    monkeypatch.setattr(subprocess, "run", _no_probe)
    assert ask.device_releases("torch", "cuda") == ["2.11.0"], "the committed shards measured torch 2.11.0 on CUDA"
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--device", "cuda"]) == 0
    out, _ = capsys.readouterr()
    assert "the report's cells on cuda: torch 2.11.0 cuda (" in out and "): from the report; not measured here\n" \
        in out, out
    assert "\n  2.11.0 cuda: 1 right\n" in out, f"the CUDA cell, not the CPU one (2.11.0 cpu is also 1 right): {out}"
    assert "predicted from the rules" in out and "2.11.0 (reverse, float64): 1" in out, out
    assert not ask_home.exists(), "nothing measured, nothing kept"
    assert main(["ask", "torch.clamp(x, min=0)", "--at", "x=0", "--device", "cuda", "--mode", "reverse",
                 "--dtype", "float32", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert (answer["device"], answer["measured_here"], answer["sources"]) == ("cuda", False, {"2.11.0": "report"}), \
        answer
    envs = {o["environment"] for o in answer["report"]["observations"]}
    assert envs == {"torch-2.11.0-cuda"}, f"only the CUDA environment's cells: {envs}"


@pytest.mark.parametrize(("argv", "words"), [
    (["torch.clamp(x, min=0)", "--at", "x=0", "--release", "2.13.0"],
     "the report holds no cuda cell of torch.clamp(x, min=0) at x=0 in 2.13.0 (it measured torch on cuda in 2.11.0)"),
    (["torch.clamp(x, min=0) * 2", "--at", "x=0"], "which measured torch there in 2.11.0, but only the catalog's"),
    (["torch.clamp(x, min=0)", "--at", "x=0", "--live"], "--live measures here, on the CPU"),
])
def test_cuda_the_report_lacks_is_one_line_naming_its_cuda_releases(ask_home, capsys, monkeypatch, argv, words):
    import subprocess

    monkeypatch.setattr(subprocess, "run", _no_probe)
    assert main(["ask", *argv, "--device", "cuda"]) == 2
    line = _one_error_line(capsys)
    assert words in line, line
