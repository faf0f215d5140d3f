"""``kinkcheck cite``: the sentence, the anchor (present in the committed Markdown), the entries, bad input."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from kinkcheck.cite import CiteError, bibtex, cff, cite, load_report, principal_case
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
    ({"program": "x ** 0.5", "case": "sqrt@0"}, "measured in both torch and jax at sqrt@0; pick one with --framework"),
    ({"program": "torch.relu(x)", "framework": "jax"}, "not in the report's catalog for jax"),
    ({"program": "torch.relu(x)", "case": "maximum@tie"}, "case 'maximum@tie' has no program"),
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
    ["cite", "torch.foo(x)"],                                      # not in the catalog
    ["cite", "x ** 0.5"],                                          # both frameworks measure this text
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


@pytest.mark.parametrize(("program", "principal"), [
    ("torch.relu(x)", "relu@0"),                  # not relu@-0.0 / relu@1e-45: floating-point edges of that kink
    ("torch.maximum(x, y)", "maximum@tie"),       # maximum@-0.0 comes first in the catalog but is a signed-zero edge
    ("jax.lax.max(x, 0.0)", "relu@0"),
    ("torch.abs(x)", "abs@0"),
    ("torch.clamp(x, -1, 1)", "clamp@-1"),        # two ordinary kinks: the first in catalog order
    ("torch.nn.functional.softplus(x)", "softplus@0"),  # only a differentiable control: that one
])
def test_without_a_case_the_principal_kink_is_cited(doc, program, principal):
    measured = [c["id"] for c in doc["cases"] if any(p["program"] == program for p in c["programs"])]
    assert principal in measured, f"catalog changed: {program} is measured in {measured}"
    c = cite(doc, program)
    assert c.case == principal and f"(kinkcheck, case {principal})." in c.sentence, (c.case, c.sentence)
    assert set(c.others) == set(measured) - {principal}, c.others
    assert c.sentence == cite(doc, program, case=principal).sentence, "the same cell as naming the case"


def test_principal_case_rule_on_hand_made_cases():
    def case(cid, kind, **at):
        return {"id": cid, "kind": kind, "at": at}

    cases = [case("a", "differentiable", x=0), case("b", "kink", x=-0.0), case("c", "kink", v=[0, 1e-45]),
             case("d", "jump", x=0.5), case("e", "kink", x=0)]
    assert principal_case(cases)["id"] == "d", "skip differentiable, signed-zero and subnormal points"
    assert principal_case(cases[:3])["id"] == "a", "none qualifies: the first in catalog order"
    with pytest.raises(ValueError):
        principal_case([])


def test_framework_picks_a_text_both_frameworks_measure(doc):
    t = cite(doc, "x ** 0.5", case="sqrt@0", framework="torch")
    j = cite(doc, "x ** 0.5", framework="jax")
    assert t.environment["framework"] == "torch" and j.environment["framework"] == "jax", (t.environment, j.environment)
    assert j.sentence.startswith("In JAX ") and j.anchor.startswith("case-sqrt-at-0--jax-x-0-5--"), j.anchor


def test_cli_without_case_lists_the_other_cases(capsys):
    assert main(["cite", "torch.relu(x)", "--report", str(REPORT)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("In PyTorch ") and out[0].endswith("(kinkcheck, case relu@0)."), out[0]
    assert out[1].startswith("Report cell: reports/conventions.md#case-relu-at-0--torch-torch-relu-x--"), out[1]
    assert out[2] == ("Also measured in: relu@1e-45, relu@-1e-45, relu@-0.0 "
                      "(kinkcheck cite 'torch.relu(x)' --case ID)"), out[2]
    assert main(["cite", "torch.relu(x)", "--case", "relu@-0.0", "--report", str(REPORT)]) == 0
    out = capsys.readouterr().out
    assert "case relu@-0.0)." in out and "Also measured in" not in out, out
