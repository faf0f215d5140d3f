"""The report's view (kinkcheck.render.view): how rows are grouped for the pages."""

from __future__ import annotations

from types import SimpleNamespace

from kinkcheck.platforms import DEFAULT, environment_id
from kinkcheck.report.model import ChangedIn
from kinkcheck.render.view import ReportView


def _row(program: str, tag: str, kind: str = "raises") -> ChangedIn:
    return ChangedIn(framework="torch", device="cpu", program=program, kind=kind, from_version="2.4.1",
                     to_version="2.5.1", from_environment=environment_id("torch", "2.4.1", "cpu", tag),
                     to_environment=environment_id("torch", "2.5.1", "cpu", tag), change="raises → 0",
                     cases=["relu@0"], modes=["reverse"], dtypes=["float16"])


def test_rows_of_two_platforms_are_not_merged_and_rows_of_one_are() -> None:
    """Rows that differ only by program share a row, per pair of environments: the same releases measured on
    Linux and on macOS arm64 stay two rows (a platform's change is its own)."""
    rows = [_row("torch.relu(x)", DEFAULT), _row("x.clamp(min=0)", DEFAULT), _row("torch.relu(x)", "macos_arm64")]
    view = ReportView(report=SimpleNamespace(changed_in=rows), problems={}, available={}, verdicts={})
    groups = view.program_groups("raises")
    assert [(g[0].from_environment, g[1]) for g in groups] == [
        ("torch-2.4.1-cpu", ["torch.relu(x)", "x.clamp(min=0)"]),
        ("torch-2.4.1-cpu-macos_arm64", ["torch.relu(x)"])], groups
    avail = [_row("torch.relu(x)", DEFAULT, "availability"), _row("torch.relu(x)", "macos_arm64", "availability")]
    view = ReportView(report=SimpleNamespace(changed_in=avail), problems={}, available={}, verdicts={})
    assert [len(g["rows"]) for g in view.availability_groups()] == [1, 1], "one group per platform"


def test_what_the_oracle_finds_is_one_phrase_for_grad_and_the_case_pages() -> None:
    from kinkcheck.render.view import oracle_finding

    assert oracle_finding("kink", True) == "a kink: continuous, not differentiable; locally Lipschitz"
    assert oracle_finding("differentiable", True) == "differentiable here; locally Lipschitz", "as docs/grad.md shows"
    assert oracle_finding("jump", False) == "a jump: not continuous; not locally Lipschitz (no Clarke set)"
    assert oracle_finding("kink", False, markdown=True) == \
        "**a kink** (continuous, not differentiable; not locally Lipschitz, no Clarke set)"
    assert oracle_finding("not-judged", True, markdown=True) == "**not judged**", "no continuity for no judgement"
    assert oracle_finding("undefined", None) == "undefined: no real value at the point, or none next to it"
