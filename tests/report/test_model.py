"""The typed report model: releases as ranges, value runs, the index, decoding and its one-line errors."""

from __future__ import annotations

import json

import msgspec
import pytest

from kinkcheck.report import model as m


def _env(version: str, device: str = "cpu", framework: str = "torch") -> m.Environment:
    return m.Environment(id=f"{framework}-{version}-{device}", framework=framework, framework_version=version,
                         device=device, python="3.11.7", platform="Linux", measured_at="2026-11-30T00:00:00+00:00",
                         kinkcheck_version="0.1.0", catalog_hash="0" * 16)


RELEASES = [_env(v) for v in ("1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.13.0", "2.14.1", "2.15.0")]


def ids(*versions: str) -> list[str]:
    return [f"torch-{v}-cpu" for v in versions]


@pytest.mark.parametrize("versions, text", [
    (("1.13.1", "2.0.1", "2.1.2", "2.2.2"), "1.13.1 – 2.2.2"),
    (("1.13.1", "2.0.1", "2.1.2", "2.2.2", "2.13.0", "2.14.1", "2.15.0"), "1.13.1 – 2.15.0"),
    (("1.13.1", "2.1.2", "2.2.2", "2.13.0", "2.15.0"), "1.13.1, 2.1.2 – 2.13.0, 2.15.0"),
    (("2.14.1", "2.15.0"), "2.14.1, 2.15.0"),
    (("2.15.0", "1.13.1"), "1.13.1, 2.15.0"),
    ((), ""),
])
def test_release_ranges_collapse_consecutive_releases(versions, text):
    assert m.release_ranges(ids(*versions), RELEASES) == text, versions


def test_release_ranges_name_a_release_outside_the_list_and_the_device():
    cuda = _env("2.13.0", "cuda")
    assert m.release_ranges([*ids("2.0.1"), cuda.id], RELEASES) == "2.0.1, torch-2.13.0-cuda", \
        "an id the ordered list lacks is named, not dropped"
    assert m.release_ranges([cuda.id], [*RELEASES, cuda]) == "2.13.0 cuda", "another device is said"


def test_value_runs_merge_consecutive_equal_values_only():
    items = [(e, v) for e, v in zip(RELEASES, (1, 1, 1, 0, 0, 1, 1))]
    runs = [(a.framework_version, b.framework_version, v) for a, b, v in m.value_runs(items)]
    assert runs == [("1.13.1", "2.1.2", 1), ("2.2.2", "2.13.0", 0), ("2.14.1", "2.15.0", 1)], \
        "a value that comes back after a change is a new run"
    assert m.value_runs([]) == []


def _report(observations: list[m.Observation]) -> m.Report:
    oracle = m.Oracle(components=["x"], kind="kink")
    case = m.Case(id="relu@0", title="relu at 0", sympy="Max(x, 0)", at={"x": 0}, tie=False, sources=["P0"],
                  note=None, programs=[m.ProgramRef(framework="torch", program="torch.relu(x)")], oracle=oracle)
    summary = m.Summary(**{f: 0 for f in m.Summary.__struct_fields__ if f != "conformance"}, conformance={})
    return m.Report(provenance=m.Provenance(generated_at="unknown", kinkcheck_version="0", catalog_hash="0"),
                    environments=RELEASES[:3], cases=[case], observations=observations, networks=[],
                    p0=m.P0(net=m.P0Net(X=[], W1=[], W2=[], target=[], loss=""), oracle=[], measured=[]),
                    disagreements=m.Disagreements(), mode_disagreements=m.ModeDisagreements(), changed_in=[],
                    conformance=m.Conformance(), version_span=[], coverage=m.Coverage(), network_summary=[],
                    summary=summary)


def _ob(env: str, value: float | str, dtype: str = "float64", mode: str = "reverse") -> m.Observation:
    return m.Observation(case="relu@0", program="torch.relu(x)", framework="torch", environment=env, mode=mode,
                         dtype=dtype, status="ok", value={"x": value}, labels=["left"], error=None)


def test_index_answers_cells_columns_and_flat_values():
    obs = [_ob("torch-1.13.1-cpu", 0.0), _ob("torch-2.0.1-cpu", "nan"), _ob("torch-2.0.1-cpu", 1.0, "float32")]
    ix = _report(obs).index
    assert ix.cell[("relu@0", "torch", "torch.relu(x)", "reverse", "torch-2.0.1-cpu", "float32")] is obs[2]
    assert [e.id for e in ix.columns["torch"]] == ["torch-1.13.1-cpu", "torch-2.0.1-cpu"], \
        "a release without observations is not a column"
    assert ix.dtypes == ["float64", "float32"] and ix.modes == ["reverse"]
    flat = ix.flat(obs[1])
    assert len(flat) == 1 and flat[0] != flat[0], "a non-finite string reads back as the float it encodes"
    assert ix.releases(["torch-1.13.1-cpu", "torch-2.0.1-cpu"]) == "1.13.1, 2.0.1"
    assert ix.newest("torch").id == "torch-2.0.1-cpu" and ix.newest("jax") is None


def test_a_report_decodes_back_and_mistakes_are_one_line():
    report = _report([_ob("torch-1.13.1-cpu", 0.0)])
    data = m.report_json(report)
    assert m.decode_report(data) == report
    doc = json.loads(data)
    doc["observations"][0]["status"] = "sideways"
    with pytest.raises(m.ReportError) as err:
        m.decode_report(json.dumps(doc), "r.json")
    assert "observations[0].status" in str(err.value) and "\n" not in str(err.value), err.value
    doc["observations"][0]["status"] = "ok"
    doc["observations"][0]["environment"] = "torch-9.9.9-cpu"
    with pytest.raises(m.ReportError, match=r"observations\[0\]: environment 'torch-9.9.9-cpu' is not among"):
        m.decode_report(json.dumps(doc), "r.json")
    doc["observations"][0]["environment"] = "torch-1.13.1-cpu"
    doc["observations"][0]["value"] = {"y": 0.0}
    with pytest.raises(m.ReportError, match="value names y; case relu@0 has inputs x"):
        m.decode_report(json.dumps(doc), "r.json")
    doc["schema"] = "kinkcheck/conventions/v1"
    with pytest.raises(m.ReportError, match="not a kinkcheck/conventions/v2 report"):
        m.decode_report(json.dumps(doc), "r.json")
    with pytest.raises(m.ReportError, match="not JSON"):
        m.decode_report(b'{"schema": ', "r.json")


def test_bytes_that_are_not_utf8_are_named_and_a_head_keeps_the_history_as_written(tmp_path):
    """Issue 46: the report's bytes are checked as UTF-8 by the JSON decoder (no second pass over 12 MB), and a
    byte that is not UTF-8 is still named as such, wherever the reader reads; a head (what `cite` reads) keeps each
    environment's history as its JSON text, encoded back byte for byte."""
    report = _report([_ob("torch-1.13.1-cpu", 0.0)])
    report.environments[0].history = [{"measured_at": "2026-11-29T19:44:45+00:00", "modes": ["reverse"]}]
    data = m.report_json(report)
    at = data.index(b'"reverse"') + 2
    (tmp_path / "conventions.json").write_bytes(data[:at] + b"\xff" + data[at + 1:])
    with pytest.raises(m.ReportError, match=rf"conventions.json: cannot read \(not UTF-8 text: byte {at}\)"):
        m.load_report(tmp_path / "conventions.json")
    with pytest.raises(m.ReportError, match=rf"cannot read \(not UTF-8 text: byte {at}\)"):
        m.decode_report(data[:at] + b"\xff" + data[at + 1:], "r.json")
    head = m.decode_report(data, head=True)
    assert isinstance(head.environments[0], m.Environment), "a head's environment is an Environment"
    assert msgspec.json.decode(head.environments[0].history) == report.environments[0].history
    assert msgspec.json.encode(head.environments[0]) == msgspec.json.encode(report.environments[0]), \
        "the history kept as written encodes as the full report's"


def test_the_gzipped_report_holds_its_head_alone_in_its_first_member(tmp_path):
    """Issue 46: a render gzips the report as two members, the head (schema … summary: what cite, ask and diff
    decode) then the derived sections, so a reader of the head inflates a tenth of the file; any gunzip reads the
    two as the one JSON; a report gzipped whole (by hand, or by an older render) is read as before."""
    import gzip
    import zlib

    from kinkcheck.report.model import gzip_bytes

    report = _report([_ob("torch-1.13.1-cpu", 0.0)])
    data = m.report_json(report)
    end = m.head_end(data)
    assert end is not None and data[end:].startswith(b',\n"networks":'), "the head ends after the summary"
    head = json.loads(data[:end] + m.HEAD_CLOSE)
    assert list(head) == ["schema", "provenance", "environments", "cases", "observations", "observations_file",
                          "summary"], list(head)
    for name, blob in (("two.json.gz", gzip_bytes(data, end)), ("one.json.gz", gzip.compress(data, mtime=0))):
        (tmp_path / name).write_bytes(blob)
        assert gzip.decompress(blob) == data, f"{name}: any gunzip reads the whole JSON"
        assert m.load_report(tmp_path / name) == report, f"{name}: the whole report"
        part = m.load_report(tmp_path / name, select=lambda r: ["torch.relu(x)"])
        assert msgspec.json.encode(part.environments) == msgspec.json.encode(report.environments), name
        assert (part.cases, part.summary, part.observations) == (report.cases, report.summary, report.observations), \
            f"{name}: the head and the rows asked"
    first = zlib.decompressobj(wbits=31)
    assert first.decompress(gzip_bytes(data, end)) == data[:end] and first.unused_data, "the head alone, first"
    assert m.head_end(json.dumps(json.loads(data)).encode()) is None, "JSON of another layout: no head to cut"
    report.environments[0].history = [{"measured_at": "2026-11-29T19:44:45+00:00"}]  # kept undecoded by a head
    data = m.report_json(report)
    bad = data.replace(b'"2026-11-29T19', b'"\xe9026-11-29T19', 1)
    assert bad != data and m.head_end(bad) is not None
    (tmp_path / "bad.json.gz").write_bytes(gzip_bytes(bad, m.head_end(bad)))
    with pytest.raises(m.ReportError, match=r"bad.json.gz: cannot read \(not UTF-8 text: byte \d+\)"):
        m.load_report(tmp_path / "bad.json.gz", select=lambda r: ())


def test_load_report_says_what_is_missing(tmp_path):
    with pytest.raises(m.ReportError, match="no report at"):
        m.load_report(tmp_path / "absent.json")
    with pytest.raises(m.ReportError, match=r"no report at .*conventions\.json$"):
        m.load_report(tmp_path)  # a folder stands for the report in it: none there


def test_a_gzipped_report_is_read_in_place_of_a_missing_json(tmp_path):
    import gzip

    report = _report([_ob("torch-1.13.1-cpu", 0.0)])
    data = m.report_json(report)
    (tmp_path / "conventions.json.gz").write_bytes(gzip.compress(data, mtime=0))
    assert m.report_path(tmp_path / "conventions.json") == tmp_path / "conventions.json.gz", "the committed gzip"
    assert m.load_report(tmp_path / "conventions.json") == report, "a fresh clone has only the .gz"
    assert m.load_report(tmp_path / "conventions.json.gz") == report, "named directly"
    (tmp_path / "conventions.json").write_bytes(data)
    assert m.report_path(tmp_path / "conventions.json") == tmp_path / "conventions.json", "the plain file first"
    (tmp_path / "bad.json.gz").write_bytes(gzip.compress(data, mtime=0)[:-9])
    with pytest.raises(m.ReportError, match=r"bad.json.gz: cannot read \(truncated gzip file\)"):
        m.load_report(tmp_path / "bad.json.gz")
    (tmp_path / "bad.json.gz").write_bytes(data)
    with pytest.raises(m.ReportError, match="not a gzip file"):
        m.load_report(tmp_path / "bad.json")


def test_optional_fields_are_left_out_of_the_json():
    data = json.loads(msgspec.json.encode(_ob("torch-1.13.1-cpu", 0.0)))
    assert "conformance" not in data and "input" not in data, "absent, not null: the JSON stays small"
    assert data["error"] is None, "error is always written"


def test_environment_machine_reads_the_runner_provenance():
    from kinkcheck.report.model import Environment

    base = dict(id="torch-2.13.0-cuda", framework="torch", framework_version="2.13.0", device="cuda", python="3.11",
                platform="Linux", measured_at="t", kinkcheck_version="0.1.0", catalog_hash="h")
    assert Environment(**base).machine == "", "an old shard records no runner"
    env = Environment(**base, runner={"os": "Linux", "arch": "x86_64", "processor": "x86_64", "accelerator": "NVIDIA H200",
                                      "driver": "570.86", "cuda": "12.8", "ci_runner": "gpu-1"})
    assert env.machine == "Linux x86_64; NVIDIA H200 (driver 570.86, cuda 12.8); GitHub Actions runner gpu-1", env.machine
    mac = Environment(**base, runner={"os": "Darwin", "arch": "arm64", "processor": "arm"})
    assert mac.machine == "Darwin arm64, arm"
    xeon = Environment(**base, runner={"os": "Linux", "arch": "x86_64", "processor": "Intel(R) Xeon(R) Processor",
                                       "vector_isa": "avx512f avx2 avx sse4_2"})
    assert xeon.machine == "Linux x86_64, Intel(R) Xeon(R) Processor (avx512f)", "the widest vector ISA: " + xeon.machine
