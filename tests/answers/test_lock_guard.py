"""``kinkcheck lock`` never passes on what it did not check (a damaged or mixed report, nothing compared); sites
predicted from the rules (issue 45); user code that exits."""

from __future__ import annotations

import textwrap

import msgspec
import pytest
from damage import FAULTS
from locking import user_module

from kinkcheck.answers import lock
from kinkcheck.cli import main

torch = pytest.importorskip("torch", reason="the models locked here are PyTorch modules")


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

    monkeypatch.setattr(lock, "user_census", census)  # the name make_lock calls
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
    user_module(tmp_path, monkeypatch, "exiting", EXITS)
    assert main(["lock", "--model", model, "--data", data, "--batches", "2", "--quiet"]) == 2
    out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and why in lines[0], f"{model} {data}: {err}"
    assert not (tmp_path / "kinkcheck.lock").exists(), "no lock written"


def test_a_module_that_calls_sys_exit_on_import_is_one_line(tmp_path, monkeypatch, capsys):
    user_module(tmp_path, monkeypatch, "leaves", "import sys\nsys.exit(0)\n")
    assert main(["lock", "--model", "leaves:model", "--data", "leaves:rows", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--model: cannot import leaves: it called sys.exit(0) on import" in err and \
        len(err.strip().splitlines()) == 1, err
