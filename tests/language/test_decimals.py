"""Numbers a person reads (issue 44, item 3): every text face prints the shortest decimal of a float
(:mod:`kinkcheck.language.decimals`: at most 17 significant digits), never selu's 60-digit rationals; ``--json`` keeps the
exact form under its own key (``{"exact": "…/…", "float": …}``)."""

from __future__ import annotations

import json
import math
import re

import pytest

from kinkcheck import cli
from kinkcheck.language.decimals import MAX_DIGITS, decimal, decimal_clarke, decimal_exact, decimal_text, decimal_value

#: selu at 0: its one-sided derivatives and Clarke set are 60-digit rationals (the catalog's constants exactly).
SELU = ("torch.nn.functional.selu(x)", "x=0", "selu@0")
#: max of three tied ones: its mean limiting gradient is (1/3, 0, 1/3, 0, 1/3, 0).
THIRD = ("torch.max(v)", "v=[1,0,1,0,1,0]", "max@[1,0,1,0,1,0]")
#: selu's left derivative at 0, exactly (the catalog's λ·α), as the oracle writes it.
SELU_LEFT = ("87904967042368842997010876040615967103012290445610415488549141/"
             "50000000000000000000000000000000000000000000000000000000000000")

_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def long_numbers(text: str) -> list[str]:
    """The numbers of ``text`` with more than :data:`MAX_DIGITS` significant digits, and every run of more than
    17 digits (a rational's numerator, a hash would be one too)."""
    out = [m.group() for m in _NUMBER.finditer(text)
           if len(re.split("[eE]", m.group())[0].replace(".", "").lstrip("0")) > MAX_DIGITS]
    return out + re.findall(r"\d{18,}", text)


# --------------------------------------------------------------------------- the formatter


@pytest.mark.parametrize("value, text", [
    (1.7580993408473766, "1.7580993408473766"), (1 / 3, "0.3333333333333333"), (0.5, "0.5"), (0.0, "0"),
    (-0.0, "-0"), (6.0, "6"), (-1, "-1"), (1e16, "1e+16"), (1e-300, "1e-300"), (float("inf"), "inf"),
    (float("-inf"), "-inf"), (float("nan"), "nan"), ("nan", "nan"), (None, "—"), (10 ** 400, "inf"),
])
def test_a_number_is_its_shortest_round_trip_decimal(value, text):
    assert decimal(value) == text, f"decimal({value!r}) = {decimal(value)!r}, expected {text!r}"


@pytest.mark.parametrize("value", [1.7580993408473766, 1 / 3, 2 ** -1074, 1.7976931348623157e308, 0.1 + 0.2, -1e-45,
                                   123456789.12345679, 2.0 ** 60])
def test_a_decimal_reads_back_as_the_same_float_in_at_most_17_digits(value):
    text = decimal(value)
    assert float(text) == value and math.copysign(1, float(text)) == math.copysign(1, value), \
        f"{text!r} does not read back as {value!r}"
    assert not long_numbers(text), f"{text!r} has more than {MAX_DIGITS} significant digits"


def test_an_oracle_value_prints_its_float_and_a_text_its_long_numbers_short():
    left = {"exact": SELU_LEFT, "float": 1.7580993408473768}
    assert decimal_exact(left) == "1.7580993408473768", decimal_exact(left)
    assert decimal_exact({"exact": "1/3"}) == "0.3333333333333333", "a JSON entry without its float: the fraction's"
    assert decimal_exact([{"exact": "1/3", "float": 1 / 3}, {"exact": "0", "float": 0.0}]) == "(0.3333333333333333, 0)"
    assert decimal_exact(None) == "—"
    assert decimal_clarke([[{"exact": "0", "float": 0.0}], [left]], 1) == "[0, 1.7580993408473768]"
    assert decimal_clarke(None, 1, lipschitz=False) == "none: f is not locally Lipschitz"
    selu = "1.0507009873554804934193349852946 * (Max(x, 0) + Min(0, 1.6732632423543772848170429916717 * (exp(x) - 1)))"
    assert decimal_text(selu) == "1.0507009873554805 * (Max(x, 0) + Min(0, 1.6732632423543772 * (exp(x) - 1)))", \
        decimal_text(selu)
    assert decimal_text(f"left {SELU_LEFT}") == "left 1.7580993408473768", "a long rational reads as its quotient"
    kept = "x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3))) + v[10] + x1"
    assert decimal_text(kept) == kept, "numbers of 17 digits or fewer, names and indices stay as written"
    assert decimal_value({"x": 1 / 3, "y": [0.0, -0.0, "nan"]}) == "x=0.3333333333333333, y=[0, -0, nan]"
    assert decimal_value(None) == "—"


# --------------------------------------------------------------------------- every face a person reads


@pytest.fixture()
def ask_home(tmp_path, monkeypatch):
    from kinkcheck.answers import ask

    monkeypatch.setenv(ask.ENV_HOME, str(tmp_path / "ask"))
    return tmp_path / "ask"


def _run(capsys, argv: list[str]) -> str:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    assert code == 0, f"kinkcheck {' '.join(argv)} exited {code}: {err}"
    return out


def _lock_line(program: str, at: str, value: dict) -> str:
    from kinkcheck.answers.lock import Change, LockedSite

    site = LockedSite(index=0, operation=program.split("(")[0], call="model.py:1", kink="x at a kink", dtype="float64",
                      hits=1, elements=1, program=program, at=at, status="ok", value={k: 0.5 for k in value},
                      labels=["mean"], source="report")
    return Change(site=site, release="2.14.1", status="ok", value=value, labels=["left"], source="report",
                  site_release="2.13.0").line("torch")


def _face(face: str, capsys, expr: str, at: str, case: str) -> str:
    import kinkcheck

    if face == "grad":
        return _run(capsys, ["grad", expr, "--at", at, "--no-isolate"])
    if face == "ask":
        return _run(capsys, ["ask", expr, "--at", at, "--all", "--quiet"])
    if face == "cite":
        return _run(capsys, ["cite", expr, "--case", case])
    if face == "lookup":
        return str(kinkcheck.lookup(expr, case=case, mode=None, dtype=None))
    if face == "migrate":
        return _run(capsys, ["migrate", "--from", "torch", "--to", "tensorflow", "--case", case])
    if face == "lock":
        (row, *_) = kinkcheck.lookup(expr, case=case, release="2.14.1")
        return _lock_line(expr, at, row.value)
    raise AssertionError(face)


@pytest.mark.parametrize("question", [SELU, THIRD], ids=["selu@0", "a third"])
@pytest.mark.parametrize("face", ["grad", "ask", "cite", "lookup", "migrate", "lock"])
def test_no_face_prints_more_than_17_significant_digits(face, question, capsys, ask_home, torch_adapter):
    expr, at, case = question
    text = _face(face, capsys, expr, at, case)
    assert text.strip(), f"{face} printed nothing for {expr} at {at}"
    assert not long_numbers(text), f"{face} on {expr} at {at} prints {long_numbers(text)[:3]} in:\n{text}"
    if question is SELU and face in ("grad", "ask", "cite", "lookup", "lock"):
        assert "1.7580993408473766" in text, f"{face}: selu's left derivative as torch measures it, whole:\n{text}"


def test_grad_reads_selu_in_decimals_and_its_json_keeps_the_exact_rationals(capsys, torch_adapter):
    expr, at, _ = SELU
    lines = _run(capsys, ["grad", expr, "--at", at, "--no-isolate"]).splitlines()
    assert "one-sided derivatives: left 1.7580993408473768, right 1.0507009873554805" in lines, "\n".join(lines)
    assert "Clarke set: [1.0507009873554805, 1.7580993408473768]; min-norm element: 1.0507009873554805" in lines, \
        "\n".join(lines)
    data = json.loads(_run(capsys, ["grad", expr, "--at", at, "--no-isolate", "--json"]))
    assert data["oracle"]["left"] == {"exact": SELU_LEFT, "float": 1.7580993408473768}, data["oracle"]["left"]
    assert data["sympy"]["text"].startswith("1.0507009873554804934193349852946"), "the function's digits, whole"


def test_ask_json_keeps_the_exact_values_under_their_own_key(capsys, ask_home):
    expr, at, _ = THIRD
    data = json.loads(_run(capsys, ["ask", expr, "--at", at, "--all", "--quiet", "--json"]))
    midpoint = data["report"]["cases"][0]["oracle"]["midpoint"]
    assert [e["exact"] for e in midpoint] == ["1/3", "0"] * 3, f"the exact thirds: {midpoint}"
    assert [e["float"] for e in midpoint] == [1 / 3, 0.0] * 3, f"beside their floats: {midpoint}"
    text = _run(capsys, ["ask", expr, "--at", at, "--all", "--quiet"])
    assert "0.3333333333333333" in text and "1/3" not in text, f"the text face prints the decimal:\n{text}"
