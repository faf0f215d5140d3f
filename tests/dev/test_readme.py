"""README.md for a newcomer (issue 31): short, the quick start on its first screen, the test command CI runs, and
the "At a glance" table generated from the data (src/kinkcheck/dev/readme.py), never typed."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

from kinkcheck.dev import readme

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_is_short_and_starts_with_what_a_user_runs():
    lines = README.splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; the rest belongs in docs/"
    first = "\n".join(lines[:80])
    for command in ("kinkcheck grad", "kinkcheck migrate", "kinkcheck cite"):
        assert command in "\n".join(lines[:150]), f"{command} is one of the first things README shows"
    assert "torch.clamp(x, min=0)" in first, "the example comes first"
    assert "python3 -m pip install nox uv && python3 -m nox -s tests" in README, \
        "the test command .ci/run runs is the one README gives"
    assert "python3 -m nox -s report" in README


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README):
        if "://" in target:
            continue
        assert (ROOT / target).exists(), f"README links to {target}, which does not exist"


def test_the_at_a_glance_table_is_the_generated_one():
    """python -m kinkcheck.dev.readme writes it; a README whose table differs from the data is stale."""
    table = readme.at_a_glance()
    assert readme.update(README, table) == README, "README's At a glance is stale: python -m kinkcheck.dev.readme"
    row = next(ln for ln in table.splitlines() if ln.startswith("| PyTorch "))
    assert "0 `torch.relu(x)`" in row and "(0.5, 0.5) `torch.maximum(x, y)`" in row, row
    assert re.search(r"\| JAX \d", table) and "| PyTensor " in table, table
    mindspore = next(ln for ln in table.splitlines() if ln.startswith("| MindSpore "))
    assert "unavailable `mindspore.ops.fmin(x, y)`" in mindspore and "error" not in mindspore, \
        f"a cell the framework cannot compute here is unavailable, not an error: {mindspore}"


def test_the_generator_refuses_a_readme_without_its_markers(tmp_path):
    with pytest.raises(ValueError, match="no block between"):
        readme.update("# no markers\n", "table")
    page = tmp_path / "README.md"
    docs = ["--docs", str(tmp_path)]  # no guide pages: only this README's blocks
    page.write_text(f"intro: {readme.FRAMEWORKS_BEGIN}two{readme.FRAMEWORKS_END}.\n{readme.BEGIN}\nold\n"
                    f"{readme.END}\nrest\n")
    assert readme.main(["--readme", str(page), *docs, "--check"]) == 1, "a stale block: exit 1, nothing written"
    assert "old" in page.read_text()
    assert readme.main(["--readme", str(page), *docs]) == 0
    assert readme.main(["--readme", str(page), *docs, "--check"]) == 0
    text = page.read_text()
    assert text.startswith(f"intro: {readme.FRAMEWORKS_BEGIN}nine real frameworks (PyTorch, ") \
        and text.endswith(f"{readme.END}\nrest\n") and "| PyTorch " in text, text[:300]
    page.write_text(f"{readme.BEGIN}\nold\n{readme.END}\n")
    assert readme.main(["--readme", str(page), *docs, "--check"]) == 2, "a README without the frameworks' markers: exit 2"
    assert readme.main(["--readme", str(tmp_path / "missing.md"), *docs]) == 2


def test_the_generator_without_a_readme_says_it_is_a_checkouts_command(tmp_path, capsys):
    """From an installed package (no README.md beside it) it is one line saying what it rewrites, exit 2, with
    --check too: not a bare "No such file" about a path under site-packages."""
    for check in ([], ["--check"]):
        assert readme.main(["--readme", str(tmp_path / "README.md"), "--docs", str(tmp_path), *check]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "checkout's README.md" in err and "--readme PATH" in err, err


def test_the_frameworks_the_first_paragraph_names_are_the_measured_ones():
    """'nine real frameworks (PyTorch, …)' is generated from the table's index: one more framework measured, and
    the README says ten, with its name."""
    import msgspec

    from kinkcheck.report.query import data_path, table_metadata

    phrase = readme.frameworks_phrase()
    assert readme.FRAMEWORKS_BEGIN + phrase + readme.FRAMEWORKS_END in README, "README's frameworks are stale"
    measured = msgspec.json.decode(table_metadata(data_path())[b"kinkcheck.index"])["releases"]
    assert phrase.count(", ") + 1 == len(measured) and "PyTorch" in phrase and "MindSpore" in phrase, phrase
    assert readme.update_all(README) == README, "python -m kinkcheck.dev.readme leaves a current README as it is"
