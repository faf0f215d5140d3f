"""kinkcheck.answers.explain: grad's judgement (sympy form, oracle, labels) and what the report holds at the point.

The judgement runs without a framework: each test hands it the value a framework returned (from the
report of the committed shards, or measured and quoted in ../shared/cases/public-cases-2.md, Q1-Q10).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time

import pytest

from kinkcheck.answers import explain
from kinkcheck.language import expr as ex
from kinkcheck.catalog import FRAMEWORKS


def _judge(program: str, at: dict, framework: str | None = None, **kw) -> explain.Judgement:
    tree = ex.parse(program, at, FRAMEWORKS)
    fw = framework or next(iter(ex.roots_of(tree)))
    return explain.judge(ex.unparse(tree), at, fw, tree=tree, **kw)


@pytest.fixture(scope="module")
def index(shards_report_files):
    """grad's index of the report the committed shards build now (conftest.py), as ``kinkcheck report`` writes it."""
    return explain.report_index(shards_report_files)


# --------------------------------------------------------------------------- Done when: every catalog program


def test_every_catalog_program_is_judged_as_the_report_judges_its_cell(catalog, shards_report, index):
    """For each of the catalog's programs, the newest release's float64 reverse-mode value from the report of the
    committed shards, judged by grad's judgement (the program mapped to sympy, the oracle, classify), gets the labels the
    report gives that cell, and the judgement names the program's case. Judgements are cached on disk
    (kinkcheck.cache.cache_dir()): a cold run takes about a minute, mostly the median and norm cases."""
    newest = {fw: index["releases"][fw]["cpu"][-1] for fw in ("torch", "jax")}
    assert newest == {fw: shards_report.index.newest(fw).framework_version for fw in newest}, newest
    cells = {(o.case, o.framework, o.program): o for o in shards_report.observations
             if o.mode == "reverse" and o.dtype == "float64" and o.framework in newest
             and o.environment == f"{o.framework}-{newest[o.framework]}-cpu"}
    wrong, judged = [], 0
    for case, program in catalog.programs():
        if program.framework not in newest:
            continue  # the mapping table covers torch's and jax's programs whole (tests/oracles/test_mapping.py)
        cell = cells.get((case.id, program.framework, program.id))
        assert cell is not None, f"{case.id}: {program.id} has no {program.framework} {newest} cell in the report"
        j = explain.judge(program.id, case.at, program.framework, tree=program.tree, cases=index["cases"])
        if case.id not in j.cases:
            wrong.append(f"{case.id} {program.id}: matched {j.cases}")
        if cell.status != "ok":
            continue
        got = explain.labels(cell.value, j, "float64")
        judged += 1
        if got != cell.labels:
            wrong.append(f"{case.id} {program.id} = {cell.value}: report {cell.labels}, grad {got} "
                         f"({j.sympy}; {j.reason})")
    assert judged >= 200, f"only {judged} catalog programs have an ok float64 cell to compare"
    assert not wrong, f"{len(wrong)} disagreements:\n" + "\n".join(wrong)


# --------------------------------------------------------------------------- the Q cases and single programs


@pytest.mark.parametrize("program, at, value, kind, lipschitz, first_label", [
    # Q3: a constant far below the probe scale is respected: differentiable at 0, derivative 0
    ("torch.clamp(x, min=1e-300)", {"x": 0}, {"x": 0.0}, "differentiable", True, "derivative"),
    # Q4: 0 ** b is 0 near b = 1
    ("torch.pow(torch.zeros_like(b), b)", {"b": 1}, {"b": 0.0}, "differentiable", True, "derivative"),
    # Q5: sqrt(|x - 1|) + 1 at 1 is not locally Lipschitz: no Clarke set, its own label
    ("torch.sqrt(torch.abs(x - 1)) + 1", {"x": 1}, {"x": 0.0}, "kink", False, "not-lipschitz"),
    # Q6: atan2 is not continuous at the origin; torch 2.13.0 returns (0, -0)
    ("torch.atan2(y, x)", {"y": 0, "x": 0}, {"y": 0.0, "x": -0.0}, "jump", False, None),
    # Q7: xlogy(x, 2) at 0 is ln 2
    ("torch.xlogy(x, 2.0)", {"x": 0}, {"x": math.log(2)}, "differentiable", True, "derivative"),
    # Q10: at x = inf the selected branch is the constant 1: derivative 0; torch returns nan
    ("torch.where(x <= 10, torch.exp(x), 1.0)", {"x": math.inf}, {"x": "nan"}, "differentiable", True, "nan"),
    ("jax.numpy.maximum(x, 0.0)", {"x": 0}, {"x": 0.5}, "kink", True, "mean"),
    ("torch.clamp(x, min=0)", {"x": 0}, {"x": 1.0}, "kink", True, "right"),
])
def test_q_cases_are_judged(program, at, value, kind, lipschitz, first_label):
    j = _judge(program, at)
    assert j.oracle is not None and j.oracle["kind"] == kind, f"{program} at {at}: {j.oracle and j.oracle['kind']}, {j.reason}"
    assert j.oracle["lipschitz"] is lipschitz, f"{program} at {at}: lipschitz {j.oracle['lipschitz']}"
    got = explain.labels(value, j, "float64")
    if first_label is None:  # a jump: no Clarke set; any finite value is judged against the one-sided limits only
        assert got and "in-clarke" not in got, f"{program} = {value}: {got}"
    else:
        assert got and got[0] == first_label, f"{program} = {value}: labels {got}, expected {first_label} first"


@pytest.mark.parametrize("value, labels", [(0.0, ["left", "min-norm"]), (5.0, ["not-judged"])])
def test_a_clarke_set_with_an_infinite_corner_is_judged_where_it_can_be(value, labels):
    """relu(x) · 1e308 · 10 at 0: its right derivative overflows float64, so its Clarke set [0, inf] has no distance
    to measure; 0 is still left and min-norm, and 5 is not judged (neither in nor outside a set nothing measures),
    never a traceback (a fresh reader's `grad`, stop 53)."""
    j = _judge("torch.relu(x) * 1e308 * 10.0", {"x": 0})
    got = explain.labels({"x": value}, j, "float64")
    assert got == labels, f"{value}: {got}"


def test_one_sided_derivatives_clarke_set_and_min_norm_of_clamp():
    j = _judge("torch.clamp(x, min=0)", {"x": 0})
    o = j.oracle
    assert j.sympy == "Max(0, x)" and j.source == "mapping", j.sympy
    assert (o["left"]["exact"], o["right"]["exact"]) == ("0", "1"), (o["left"], o["right"])
    assert [v[0]["exact"] for v in o["clarke"]] == ["0", "1"] and o["min_norm"][0]["exact"] == "0", o["clarke"]


def test_a_tie_among_inputs_gets_tie_labels():
    """torch.amax of a vector with its maximum repeated: the gradient shared evenly is split-even."""
    j = _judge("torch.amax(v)", {"v": [1, 3, 3]})
    assert j.tie, "Max(v) at a repeated maximum is a tie"
    assert explain.labels({"v": [0.0, 0.5, 0.5]}, j, "float64")[0] == "split-even"
    assert explain.labels({"v": [0.0, 1.0, 0.0]}, j, "float64")[0] == "first"
    assert not _judge("torch.clamp(x, min=1e-45)", {"x": 1e-45}).tie, "one input against a constant is no tie"


@pytest.mark.parametrize(("program", "at", "value", "label"), [
    # issue 44: [1, 1] gives the tie of cummax[1] to v[1], the latest tied input
    ("torch.cummax(v, 0).values.sum()", {"v": [1, 1]}, [1.0, 1.0], "last"),
    ("torch.cummax(v, 0).values.sum()", {"v": [1, 1]}, [2.0, 0.0], "first"),
    ("torch.amax(v)", {"v": [1, 3, 3]}, [0.0, 0.0, 1.0], "last"),
    # at the catalog's point the case's own expression routes (the report's labels)
    ("torch.cummax(v, 0).values.sum()", {"v": [1, 1, 0]}, [1.0, 2.0, 0.0], "last"),
])
def test_tie_labels_follow_input_position(program, at, value, label):
    j = _judge(program, at)
    got = explain.labels({"v": value}, j, "float64")
    assert got is not None and got[0] == label, f"{program} at {at}: {value} labelled {got}, expected {label} first"


def test_an_unmapped_function_is_not_judged_with_the_reason():
    j = _judge("torch.lgamma(x)", {"x": 1})
    assert j.oracle is None and j.sympy is None, j
    assert j.reason == "not judged: no symbolic form for torch.lgamma (pass one with --sympy '…')", j.reason
    assert explain.labels({"x": -0.5772156649015329}, j, "float64") is None, "no labels without an oracle"


def test_a_sympy_form_given_by_the_user_is_used_and_other_inputs_are_constants():
    j = _judge("torch.cumsum(x, 0)", {"x": [0, 1]}, sympy_text="2 * x[0] + x[1]")
    assert j.source == "--sympy" and j.oracle["kind"] == "differentiable", j
    assert [c["exact"] for c in j.oracle["derivative"]] == ["2", "1"], j.oracle["derivative"]
    w = _judge("torch.relu(x) * y", {"x": 0, "y": 2}, wrt=("x",), sympy_text="Max(x, 0) * y")
    assert w.components == ("x",) and (w.oracle["left"]["exact"], w.oracle["right"]["exact"]) == ("0", "2"), w


@pytest.mark.parametrize("text, message", [
    ("Max(x, 0", "malformed"),
    ("__import__('os')", "unknown name"),
    ("Max(z, 0)", "unknown name 'z'"),
])
def test_a_bad_sympy_form_is_bad_input(text, message):
    with pytest.raises(ex.ExprError, match=message):
        _judge("torch.relu(x)", {"x": 0}, sympy_text=text, use_cache=False)


# --------------------------------------------------------------------------- the report


def test_report_rows_put_the_program_first_with_its_release_ranges(index):
    j = _judge("torch.clamp(x, min=0)", {"x": 0}, cases=index["cases"])
    same = {"relu@0", "masked_fill@0", "select-relu@0", "cond@0", "select@0", "threshold0@0"}  # Max(x, 0) at 0; relu6 differs at 6
    assert j.cases[0] == "relu@0" and set(j.cases) == same, f"Max(x, 0) at 0 is the cases {same}: {j.cases}"
    view = explain.report_rows(index, "torch.clamp(x, min=0)", "torch", j.cases)
    first = view.rows[0]
    assert first["this"] and first["program"] == "torch.clamp(x, min=0)", view.rows[0]
    shown = [(r["framework"], r["program"], json.dumps(r["ranges"], sort_keys=True)) for r in view.rows]
    assert len(shown) == len(set(shown)), "a program of two cases that measured alike is one row"
    spans = [(r["value"], r["label"], r["from"], r["to"]) for r in first["ranges"]]
    assert spans == [({"x": 1.0}, "right", "1.13.1", "2.13.0"), ({"x": 0.0}, "left", "2.14.1", "2.15.0")], spans
    frameworks = [r["framework"] for r in view.rows]
    assert frameworks == sorted(frameworks, key=lambda f: f != "torch"), "torch rows, then jax rows"
    assert "relu@-0.0" in view.elsewhere, view.elsewhere


def test_a_program_matched_by_its_function_shows_that_case(index):
    """jax.numpy.maximum(y, x) is no catalog program, but at x = y = 1 it is Max(x, y): maximum@tie."""
    j = _judge("jax.numpy.maximum(y, x)", {"x": 1, "y": 1}, cases=index["cases"])
    assert j.cases == ("maximum@tie", "scatter_max@tie") and j.tie, j  # both are Max(x, y) at x = y = 1
    view = explain.report_rows(index, "jax.numpy.maximum(y, x)", "jax", j.cases)
    assert view.rows and not any(r["this"] for r in view.rows), "the program itself was not measured"


def test_a_missing_report_says_so(tmp_path):
    with pytest.raises(explain.ReportUnavailable, match="no report at"):
        explain.report_index(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something else"}')
    with pytest.raises(explain.ReportUnavailable, match="bad.json: not a kinkcheck/conventions/v2 report"):
        explain.report_index(bad)
    bad.write_text('{"schema": "kinkcheck/conventions/v1"}')
    with pytest.raises(explain.ReportUnavailable, match="re-render it with `kinkcheck report`"):
        explain.report_index(bad)


# --------------------------------------------------------------------------- cache and bound


def test_a_warm_judgement_imports_no_sympy(tmp_path):
    code = ("import sys, json; from kinkcheck.answers import explain; from kinkcheck.language import expr as ex; from kinkcheck.catalog import FRAMEWORKS; "
            "at = {'x': 0}; t = ex.parse('torch.clamp(x, min=0)', at, FRAMEWORKS); "
            "j = explain.judge(ex.unparse(t), at, 'torch', tree=t); "
            "print(json.dumps([j.sympy, 'sympy' in sys.modules]))")
    env = {"KINKCHECK_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                      check=True, timeout=300).stdout) for _ in range(2)]
    assert runs[0] == ["Max(0, x)", True], f"cold: mapping and oracle run: {runs[0]}"
    assert runs[1] == ["Max(0, x)", False], f"warm: the cached judgement, no sympy import: {runs[1]}"


def test_a_judgement_past_its_bound_is_not_judged_and_does_not_wait(monkeypatch, tmp_path):
    """The judgement's worker (here one that never answers) is killed at the bound; grad answers without it."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))  # a miss: the worker runs
    monkeypatch.setattr(explain, "_WORKER", [sys.executable, "-c", "import time; time.sleep(60)"])
    t0 = time.monotonic()
    pending = explain.Pending("torch.relu(x)", {"x": 0}, "torch", report=str(tmp_path / "none.json"), bound_s=0.5)
    with pytest.raises(explain.ReportUnavailable):  # an explicit --report that is missing is bad input
        pending.finish({"x": 0.0})
    monkeypatch.chdir(tmp_path)  # no report here nor in the package, none named: just "no report"
    monkeypatch.delenv("KINKCHECK_REPORTS", raising=False)
    monkeypatch.setattr(explain, "default_report", lambda: tmp_path / "conventions.json")
    pending = explain.Pending("torch.relu(x)", {"x": 0}, "torch", bound_s=0.5)
    e = pending.finish({"x": 0.0})
    assert time.monotonic() - t0 < 20, "finish waits at most the bound"
    assert e.judgement.reason == "not judged: the oracle exceeded 0.5 s (change it with --oracle-timeout)", e.judgement
    assert e.report.problem == f"no report at {tmp_path / 'conventions.json'}", e.report
    assert e.labels is None and "not judged: the oracle exceeded 0.5 s" in explain.render(e)
    assert pending._proc is not None and pending._proc.wait(timeout=10) < 0, "the worker was killed"


def test_a_failing_judgement_is_said_not_raised(monkeypatch, tmp_path):
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(explain, "_WORKER", [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"])
    monkeypatch.chdir(tmp_path)
    e = explain.Pending("torch.relu(x)", {"x": 0}, "torch").finish({"x": 0.0})
    assert e.judgement.reason == "not judged: the judgement failed (exit status 3)", e.judgement
    assert e.value == {"x": 0.0} and e.labels is None, e


def test_the_judgement_worker_answers_as_judge_does(monkeypatch, tmp_path):
    """A cache miss runs judge() in python -m kinkcheck.answers.explain; a --sympy text that does not evaluate there
    comes back as bad input."""
    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    e = explain.Pending("torch.relu(x)", {"x": 0}, "torch").finish({"x": 0.0})
    assert e.judgement.sympy == "Max(0, x)" and e.labels == ["left", "min-norm", "in-clarke"], e.judgement
    with pytest.raises(ex.ExprError, match="does not evaluate"):
        explain.Pending("torch.relu(x)", {"x": 0}, "torch", sympy_text="Max(x)(x)").finish({"x": 0.0})


def test_grad_reads_the_table_not_the_json(shards_report_files, shards_report_path, tmp_path, monkeypatch):
    """report_index reads the cases and releases from observations.parquet's metadata and report_rows the rows of
    the cases shown: the report JSON is never decoded. A report without its table says to re-render, in one line."""
    from kinkcheck.report import model

    decoded = []
    monkeypatch.setattr(model, "load_report", lambda *a, **k: decoded.append(a) or pytest.fail("decoded the JSON"))
    index = explain.report_index(shards_report_files)
    view = explain.report_rows(index, "torch.clamp(x, min=0)", "torch", ("relu@0",))
    spans = [(r["value"], r["label"], r["from"], r["to"]) for r in view.rows[0]["ranges"]]
    assert spans == [({"x": 1.0}, "right", "1.13.1", "2.13.0"), ({"x": 0.0}, "left", "2.14.1", "2.15.0")], spans
    assert decoded == [], "the table answers alone"
    monkeypatch.undo()
    alone = tmp_path / "conventions.json"
    alone.write_bytes(shards_report_path.read_bytes())
    with pytest.raises(explain.ReportUnavailable, match=r"no observations.parquet beside it .* re-render it"):
        explain.report_index(alone)


def test_grad_reads_only_the_row_groups_of_the_cases_it_shows(index, monkeypatch):
    """Issue 46, item 2: report_rows asks pyarrow for the row groups that hold the cases shown (the table's
    row-group index), one at a time, not for the whole table (one read of it peaked at 311 MB)."""
    import json

    import pyarrow.parquet as pq

    from kinkcheck.report.query import ROW_GROUPS

    asked: list[int] = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group",
                        lambda self, i, *a, **k: asked.append(i) or real(self, i, *a, **k))
    cases = ("relu@0", "cond@0", "select@0")
    view = explain.report_rows(index, "torch.clamp(x, min=0)", "torch", cases)
    assert view.rows[0]["this"] and view.rows[0]["ranges"][-1]["value"] == {"x": 0.0}, view.rows[0]
    file = pq.ParquetFile(index["table"])
    held = json.loads(file.metadata.metadata[ROW_GROUPS])["case"]
    total = file.metadata.num_row_groups
    assert asked == sorted({g for c in cases for g in held[c]}), f"the groups of {cases}: {asked}"
    assert 0 < len(asked) <= len(cases) * 2 < total, f"a case lies in one or two groups: read {asked} of {total}"


def test_a_shard_from_another_platform_does_not_stand_in_for_linux(shards_report, tmp_path):
    """grad's report lines read one place: a macOS arm64 copy of torch 2.15.0 with relu'(0) = 1 changes
    nothing at ``cpu`` (Linux x86-64) and is found at ``cpu-macos_arm64``."""
    from conftest import torch_2_15_elsewhere

    report, _, _ = torch_2_15_elsewhere(shards_report, id="torch-2.15.0-cpu-macos_arm64", platform_tag="macos_arm64")
    from conftest import write_report_files

    index = explain.report_index(write_report_files(report, tmp_path))
    linux = explain.report_rows(index, "torch.relu(x)", "torch", ("relu@0",)).rows[0]["ranges"]
    assert linux[-1]["value"] == {"x": 0.0} and linux[-1]["to"] == "2.15.0", linux
    mac_rows = explain.report_rows(index, "torch.relu(x)", "torch", ("relu@0",), device="cpu-macos_arm64").rows[0]
    assert [(r["value"], r["from"], r["to"]) for r in mac_rows["ranges"]] == [({"x": 1.0}, "2.15.0", "2.15.0")]


def test_a_catalog_program_the_mapping_lacks_is_judged_on_its_case_s_field(index):
    """torch.linalg.eigvalsh is not in the mapping (a decomposition): at its catalog case's point grad judges it on
    eigvalsh@repeated's hand-written sympy field, names that case first, and labels the measured value as the
    report does (0.5 on each diagonal entry: the tie split evenly, the minimum-norm element of the Clarke set)."""
    case = next(c for c in index["cases"] if c["id"] == "eigvalsh@repeated")
    j = explain.judge("torch.linalg.eigvalsh(m)[-1]", case["at"], "torch", cases=index["cases"], use_cache=False)
    assert j.source == "catalog" and j.cases[0] == "eigvalsh@repeated", (j.source, j.cases)
    assert j.oracle is not None and j.oracle["kind"] == "kink" and j.tie, j.oracle
    got = explain.labels({"m": [[0.5, 0.0], [0.0, 0.5]]}, j, "float64")
    assert got[0] == "split-even" and "min-norm" in got, got
    other = explain.judge("torch.linalg.eigvalsh(m)[-1]", {"m": [[2, 0], [0, 1]]}, "torch", cases=index["cases"],
                          use_cache=False)
    assert other.oracle is None and "no symbolic form" in other.reason, "away from a catalog point: not judged"


def test_a_parameter_the_catalog_lacks_points_to_the_closest_measured_cases(index):
    """Issue 32, item 3: ELU with alpha=14.5 at 0 is in no case (the catalog has alpha 0.5, 1 and 2 there); grad names
    the cases at this point where torch measured ELU with other arguments, with their rows, never "nothing"."""
    elu = "torch.nn.functional.elu(x, alpha=14.5)"
    view = explain.report_rows(index, elu, "torch", (), at={"x": 0.0})
    assert view.same_operation == ("torch.nn.functional.elu",), view.same_operation
    assert {"elu@0", "elu2@0"} <= set(view.cases), view.cases
    assert view.rows and all(r["framework"] == "torch" and "torch.nn.functional.elu(" in r["program"]
                             and not r["this"] for r in view.rows), view.rows
    alpha2 = next(r for r in view.rows if r["program"] == "torch.nn.functional.elu(x, alpha=2.0)")
    assert [(g["value"], g["label"]) for g in alpha2["ranges"]] == [({"x": 2.0}, "left")], alpha2["ranges"]
    assert explain.report_rows(index, elu, "torch", (), at={"x": 5.0}).rows == [], "another point: nothing near"
    hardtanh = explain.report_rows(index, "torch.nn.functional.hardtanh(x, -3.0, 3.0)", "torch", (), at={"x": 3.0},
                                   kink=True)
    assert {"clamp@-1", "clamp@1", "hardtanh-2,2@2"} <= set(hardtanh.cases) and hardtanh.other_points, \
        "at a kink, the operation measured at other points"
    assert explain.report_rows(index, "torch.nn.functional.hardtanh(x, -3.0, 3.0)", "torch", (),
                               at={"x": 3.0}).rows == [], "no kink said: only the same point is close"
    assert explain.report_rows(index, elu, "torch", ()).same_operation == (), "no point given: as before"
    e = explain.Explanation({"x": 14.5}, elu, "torch", "float64", "reverse",
                            explain.Judgement(None, "none", ("x",), None, "not judged: test"), None, view)
    text = explain.render(e)
    assert f"{elu} is not measured at this point; torch.nn.functional.elu with other arguments is, at elu@0" in text, \
        text
    assert "nothing at this point" not in text and "torch.nn.functional.elu(x, alpha=2.0)" in text, text


def test_the_rule_of_a_parameter_is_said_when_every_measured_kink_follows_it(index):
    """Issue 32, item 3: at alpha 0.5 and 2 every measured torch release gives ELU's left one-sided derivative
    (alpha), so grad states the rule and what it gives at alpha=14.5 (29/2); celu2@0's row, differentiable there,
    neither makes nor breaks it."""
    elu = "torch.nn.functional.elu(x, alpha=14.5)"
    view = explain.report_rows(index, elu, "torch", (), at={"x": 0.0})
    assert explain.parameter_rule(view) == (("left",), ("elu@0", "elu2@0")), explain.parameter_rule(view)
    j = explain.judge(elu, {"x": 0.0}, "torch", cases=index["cases"], use_cache=False)
    e = explain.Explanation({"x": 14.5}, elu, "torch", "float64", "reverse", j, ["left", "in-clarke"], view)
    text = explain.render(e)
    assert ("rule: at every kink measured with other arguments (elu@0, elu2@0), every measured torch release gives "
            "the left one-sided derivative (left); at this point that is 14.5\n  this value follows it") in text, text
    e.labels = ["right", "min-norm"]
    assert "this value does not follow it (its labels: right, min-norm)" in explain.render(e)


def test_the_new_slope_settles_a_rule_two_slopes_could_not(index):
    """leaky_relu at slopes 0.01 and 0.2: the left one-sided derivative is also the minimum-norm element there, so
    those two cases alone could not tell the rules apart (the review of issue 32: stating "left" from them was
    luck); leaky_relu1.5@0, where they differ (3/2 and 1), settles it for torch: left."""
    program = "torch.nn.functional.leaky_relu(x, 3.0)"
    view = explain.report_rows(index, program, "torch", (), at={"x": 0.0})
    rules, cases = explain.parameter_rule(view)
    assert rules == ("left",) and {"leaky_relu@0", "leaky_relu0.2@0", "leaky_relu1.5@0"} <= set(cases), (rules, cases)


def test_two_rules_the_measured_cases_cannot_tell_apart_are_said_to_be_ambiguous():
    """Two kinks where left and min-norm coincide: at a point where they differ grad names both and says the cases
    do not decide, and which one this value is."""
    rows = [{"case": c, "framework": "torch", "program": f"f(x, {a})", "this": False,
             "ranges": [{"from": "1", "to": "2", "releases": 2, "status": "ok", "value": {"x": a}, "label": "left",
                         "labels": ["left", "min-norm", "in-clarke"]}]} for c, a in (("f@0", 0.01), ("f0.2@0", 0.2))]
    view = explain.ReportView("r", None, ("f@0", "f0.2@0"), rows, same_operation=("f",))
    j = explain.Judgement(None, "mapping", ("x",), {"kind": "kink", "left": [{"exact": "3/2"}], "right": [{"exact": "1"}],
                                                    "min_norm": [{"exact": "1"}]}, None)
    text = explain.render(explain.Explanation({"x": 1.5}, "f(x, 1.5)", "torch", "float64", "reverse", j,
                                              ["left", "in-clarke"], view))
    assert ("gives the left one-sided derivative (left) and the minimum-norm element of the Clarke set (min-norm), "
            "equal there; here they differ (left 1.5, min-norm 1), so the measured cases do not say which rule "
            "holds") in text, text
    assert "this value is the left one-sided derivative (left)" in text, text


def test_no_rule_where_the_closest_cases_disagree_or_only_one_is_a_kink():
    def view(*labels):
        rows = [{"case": f"c{i}@0", "framework": "torch", "program": f"p{i}", "this": False,
                 "ranges": [{"from": "1", "to": "2", "releases": 2, "status": "ok", "value": {}, "label": lab[0],
                             "labels": list(lab)}]}
                for i, lab in enumerate(labels)]
        return explain.ReportView("r", None, tuple(r["case"] for r in rows), rows, same_operation=("f",))
    assert explain.parameter_rule(view(["left", "min-norm"], ["right"])) is None, "left at one, right at the other"
    assert explain.parameter_rule(view(["left"], ["derivative"])) is None, "one kink is no rule"
    assert explain.parameter_rule(view(["left", "min-norm"], ["left"])) == (("left",), ("c0@0", "c1@0"))
    assert explain.parameter_rule(view(["split-even", "min-norm"], ["split-even", "min-norm", "in-clarke"])) == \
        (("split-even", "min-norm"), ("c0@0", "c1@0")), "every label in common, most specific first"
    no_op = explain.ReportView("r", None, ("c0@0",), view(["left"], ["left"]).rows)
    assert explain.parameter_rule(no_op) is None, "rows of the asked program's own cases: no rule to state"


def test_an_order_statistic_sympy_expanded_gets_no_tie_position_label():
    """Away from the catalog's point grad routes on the mapping's form, where kthvalue is a max of mins and its
    ranks are hidden: no first, last or one-index then (issue 44: one-index would say "neither")."""
    j = _judge("torch.kthvalue(v, 2).values", {"v": [2, 0, 2, 0]})
    got = explain.labels({"v": [0.0, 0.0, 0.0, 1.0]}, j, "float64")
    assert got is not None and not set(got) & {"first", "last", "one-index"} and "in-clarke" in got, got


def test_an_error_cell_from_the_report_says_what_the_framework_raised():
    """grad --device cuda without a GPU where the report's CUDA cell is an error (torch 2.11.0's heaviside has no
    derivative): the first line names the error the report holds, not a bare "(error)" above a null value."""
    from conftest import ROOT

    p = explain.Pending("torch.heaviside(x, torch.full_like(x, 0.5))", {"x": 0}, "torch", report=str(ROOT / "reports"),
                        device="cuda", bound_s=60)
    try:
        got = p.from_report()
    finally:
        p.cancel()
    assert (got.value, got.status, got.release) == (None, "error", "2.11.0"), got
    assert got.error and "derivative for aten::heaviside is not implemented" in got.error, got
    line = got.headline()
    assert line.startswith("from the report; not measured here") and "(error: RuntimeError: derivative for " \
        "aten::heaviside is not implemented" in line and "\n" not in line, line
    assert got.to_json()["error"] == got.error


def test_a_device_this_machine_lacks_is_answered_from_the_reports_cell(shards_report_files):
    """Issue 46, item 4: Pending.from_report gives the report's cell on the request's device (torch 2.11.0 on CUDA:
    clamp's min=0 bound 1, right; relu 0, left), the installed release's where the report measured it there, else
    the newest, marked as not measured here; a program without a CUDA cell is one line naming the CUDA releases."""
    folder = str(shards_report_files.parent)
    p = explain.Pending("torch.clamp(x, min=0.0)", {"x": 0}, "torch", report=folder, device="cuda", bound_s=30)
    try:
        got = p.from_report("2.13.0")  # not measured on CUDA: the newest CUDA release answers
    finally:
        p.cancel()
    assert (got.value, got.status, got.label, got.release, got.cases) == ({"x": 1.0}, "ok", "right", "2.11.0",
                                                                         ("relu@0",)), got
    assert got.headline().startswith("from the report; not measured here (this machine has no CUDA device): torch "
                                     "2.11.0 on cuda, reverse, float64"), got.headline()
    assert got.to_json()["measured_here"] is False and got.releases == ("2.11.0",), got.to_json()
    p = explain.Pending("torch.relu(x)", {"x": 0}, "torch", report=folder, device="cuda", dtype="float32", bound_s=30)
    try:
        assert p.from_report("2.11.0").value == {"x": 0.0}, "the installed release's cell where the report has it"
    finally:
        p.cancel()
    p = explain.Pending("torch.relu(x) * 3", {"x": 0}, "torch", report=folder, device="cuda", bound_s=30)
    try:
        with pytest.raises(explain.ReportUnavailable, match=r"no CUDA device, and the report .* holds no cuda cell of "
                           r"torch.relu\(x\) \* 3 at x=0 in reverse mode, float64 \(its torch releases measured on "
                           r"cuda: 2.11.0\)"):
            p.from_report()
    finally:
        p.cancel()
