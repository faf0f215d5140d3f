"""``kinkcheck cite``: the sentence, the anchor (present in the committed Markdown), the entries, bad input."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from kinkcheck.cite import CiteError, bibtex, cff, cite, load_report
from kinkcheck.cli import main

from conftest import ROOT

REPORT = ROOT / "reports" / "conventions.json"


@pytest.fixture(scope="module")
def doc():
    return load_report(REPORT)


def test_sentence_states_value_label_release_and_rule(doc):
    c = cite(doc, "torch.clamp(x, min=0)", case="relu@0", framework_version="2.13.0")
    assert c.sentence == (
        "In PyTorch 2.13.0 (CPU, float64, reverse mode), the derivative of `torch.clamp(x, min=0)` at x = 0 is 1 "
        "(right: equals the right one-sided derivative f'(x0+)); this departs from PyTorch's documented rule "
        "(kinkcheck, case relu@0)."
    ), c.sentence
    assert c.anchor == "case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu", c.anchor


def test_anchor_exists_in_the_committed_markdown(doc):
    md = (ROOT / "reports" / "conventions.md").read_text()
    for program, case in [("torch.clamp(x, min=0)", "relu@0"), ("jnp.maximum(x, 0.0)", "relu@0"),
                          ("torch.amax(v)", "max@[1,1]")]:
        c = cite(doc, program, case=case)
        assert f'id="{c.anchor}"' in md, f"anchor {c.anchor} missing from reports/conventions.md"


def test_alias_and_spacing_are_canonicalised(doc):
    c = cite(doc, "jnp.maximum(x,0.0)", case="relu@0")
    assert "`jax.numpy.maximum(x, 0.0)`" in c.sentence and "is 0.5 (mean" in c.sentence, c.sentence
    newest = max((e["framework_version"] for e in doc["environments"] if e["framework"] == "jax"), key=Version)
    assert c.environment["framework_version"] == newest, "the newest measured JAX by default"


def test_other_modes_link_the_modes_table(doc):
    md = (ROOT / "reports" / "conventions.md").read_text()
    c = cite(doc, "torch.clamp(x, -1, 1)", case="clamp@-1", mode="inductor")
    assert c.anchor.endswith("--modes--inductor") and f'id="{c.anchor}"' in md, c.anchor
    old = cite(doc, "torch.clamp(x, -1, 1)", case="clamp@-1", mode="inductor", framework_version="2.13.0")
    assert old.anchor == "case-clamp-at-minus-1--torch-torch-clamp-x-minus-1-1", \
        f"an older release's other mode links the program row: {old.anchor}"


def test_mode_and_dtype_select_the_cell(doc):
    c = cite(doc, "torch.minimum(x, torch.full_like(x, 0.7))", case="hardtanh0.7@0.69921875", mode="inductor",
             dtype="bfloat16", framework_version="2.13.0")
    assert "bfloat16, inductor mode" in c.sentence, c.sentence
    assert c.observation["mode"] == "inductor" and c.observation["dtype"] == "bfloat16", c.observation


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"program": "torch.relu(x)"}, "pick one with --case"),
    ({"program": "torch.foo(x)"}, "not in the report's catalog"),
    ({"program": "torch.relu(x)", "case": "nope@0"}, "unknown case"),
    ({"program": "torch.relu(x)", "case": "relu@0", "framework_version": "9.9"}, "not in the report"),
    ({"program": "torch.relu(x)", "case": "relu@0", "mode": "jit"}, "torch has no jit mode"),
    ({"program": "torch.relu(x)", "case": "relu@0", "dtype": "float128"}, "unknown dtype"),
])
def test_bad_requests(doc, kwargs, message):
    with pytest.raises(CiteError, match=message):
        cite(doc, **kwargs)


def test_entries_name_the_report(doc):
    b = bibtex(doc)
    assert b.startswith("@misc{kinkcheck-") and doc["provenance"]["catalog_hash"] in b and b.endswith("}"), b
    y = cff(doc)
    assert "type: data" in y and doc["provenance"]["catalog_hash"] in y, y


def test_cli_prints_sentence_anchor_and_entry(capsys):
    assert main(["cite", "torch.clamp(x, -1, 1)", "--case", "clamp@-1", "--report", str(REPORT)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("In PyTorch ") and "clamp@-1" in out[0], out[0]
    assert out[1].startswith("Report cell: reports/conventions.md#case-clamp-at-minus-1--torch-"), out[1]
    assert any(line.startswith("@misc{") for line in out), out


@pytest.mark.parametrize("argv", [
    ["cite", "torch.relu(x)"],                                     # ambiguous case
    ["cite", "torch.relu(x)", "--case", "relu@0", "--report", "/nonexistent/report.json"],
])
def test_cli_bad_input_is_one_line_exit_2(argv, capsys, tmp_path):
    if "--report" not in argv:
        argv = argv + ["--report", str(REPORT)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kinkcheck: error:"), err


def test_cli_refuses_a_file_that_is_not_a_report(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"schema": "something/else"}))
    assert main(["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(bad)]) == 2
    assert "not a kinkcheck/conventions/v1 report" in capsys.readouterr().err


@pytest.mark.parametrize(("part", "value", "words"), [
    ("generated_at", 5, "provenance/generated_at: 5 is not of type 'string'"),
    ("catalog_hash", None, "provenance/catalog_hash: None is not of type 'string'"),
    ("kinkcheck_version", [], "provenance/kinkcheck_version"),
])
def test_mistyped_provenance_prints_no_sentence_then_a_traceback(doc, tmp_path, capsys, part, value, words):
    """cite used to print its sentence and then fail in the BibTeX entry: now it checks first, prints nothing."""
    small = {**doc, "observations": doc["observations"][:50], "provenance": {**doc["provenance"], part: value}}
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(small))
    assert main(["cite", "torch.relu(x)", "--case", "relu@0", "--report", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "", f"nothing on stdout before the error: {out!r}"
    assert len(err.strip().splitlines()) == 1 and words in err, err
