"""``kinkcheck.lookup`` and ``kinkcheck.search`` (src/kinkcheck/report/query.py): the report's rows from the committed
``reports/observations.parquet``, from any folder, in a clone and from an installed wheel outside the repository."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT
from damage import FAULTS

import kinkcheck
from kinkcheck.report.query import (
    LookupFailed,
    ReportUnreadable,
    Row,
    data_path,
    default_report,
    lookup,
    nearest_programs,
    search,
)

CLAMP = "torch.clamp(x, min=0)"


@pytest.fixture(autouse=True)
def _source_tree_data(monkeypatch):
    monkeypatch.delenv("KINKCHECK_REPORTS", raising=False)


def test_lookup_gives_the_measured_values_of_a_program_across_releases():
    """The seed's change: torch.clamp(x, min=0) at 0 was 1 (right) up to 2.13.0 and is 0 (left) from 2.14.1."""
    rows = lookup(CLAMP, case="relu@0")
    assert rows and all(isinstance(r, Row) for r in rows)
    by_release = {r.release: (r.value, r.label) for r in rows}
    assert by_release["2.13.0"] == ({"x": 1.0}, "right") and by_release["2.14.1"] == ({"x": 0.0}, "left"), by_release
    assert all((r.mode, r.dtype, r.device, r.framework) == ("reverse", "float64", "cpu", "torch") for r in rows)
    releases = [r.release for r in rows]
    assert releases[0] == "1.13.1" and releases.index("2.13.0") < releases.index("2.14.1"), "oldest release first"
    (one,) = kinkcheck.lookup("torch.clamp(x,min=0)", case="relu@0", release="2.14.1")
    assert one.value == {"x": 0.0} and str(one) == \
        "torch 2.14.1 cpu reverse float64  relu@0  torch.clamp(x, min=0): 0 (left)", str(one)
    assert kinkcheck.lookup is lookup and kinkcheck.search is search, "the package's names are the functions"


def test_lookup_filters_by_mode_dtype_device_and_any():
    cuda = lookup("torch.topk(v, 1).values", case="max@[1,0,1,0,1,0]", device="cuda")
    assert [(r.release, r.value) for r in cuda] == [("2.11.0", {"v": [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]})], cuda
    every = lookup(CLAMP, case="relu@0", release="2.14.1", mode=None, dtype=None, device=None)
    assert {r.mode for r in every} >= {"reverse", "inductor", "vmap"} and {r.dtype for r in every} == \
        {"float64", "float32", "float16", "bfloat16"}, "None: every mode and dtype"
    f16 = lookup(CLAMP, case="relu@0", release="2.14.1", dtype="float16")
    assert len(f16) == 1 and f16[0].dtype == "float16"


def test_lookup_answers_the_reference_cpu_unless_asked_for_another_level():
    """Issue 49: a release measured at three x86-64 levels still has one row per program, mode and dtype by default
    (the reference machine's, Linux x86-64); platform= names a lower level's shard, None all of them."""
    ask = {"case": "abs@0", "release": "3.3.1", "mode": "graph", "dtype": "bfloat16"}
    (ref,) = lookup("paddle.abs(x)", **ask)
    assert (ref.platform_tag, ref.status, ref.value) == ("linux_x86_64", "ok", {"x": 0.0}), ref
    (low,) = lookup("paddle.abs(x)", **ask, platform="linux_x86_64_v3")
    assert low.status == "error" and "has no bfloat16 `abs` kernel" in low.error, low
    every = lookup("paddle.abs(x)", **ask, platform=None)
    assert sorted(r.platform_tag for r in every) == ["linux_x86_64", "linux_x86_64_v2", "linux_x86_64_v3"], every


@pytest.mark.parametrize("kwargs, message", [
    ({"program": "torch.clamp(x, max=0)"}, "nearest: torch.clamp(x, max=y); torch.clamp(x, max=1); torch.clamp(x, min=0)"),
    ({"program": CLAMP, "mode": "sideways"}, "unknown mode 'sideways'"),
    ({"program": CLAMP, "dtype": "float8"}, "unknown dtype 'float8'"),
    ({"program": CLAMP, "device": "tpu"}, "unknown device 'tpu'"),
    ({"program": CLAMP, "release": "9.9.9"}, "no release '9.9.9' for this query (there are: 1.13.1, 2.0.1"),
    ({"program": CLAMP, "case": "abs@0"}, "no case 'abs@0' for this query (there are: "),
    ({"case": "relu@7"}, "no case 'relu@7' for this query (184 cases; nearest: relu@0"),
    ({"program": 123}, "program must be a string, not int"),
    ({"program": CLAMP, "platform": 1}, "platform must be a string, not int"),
])
def test_lookup_refuses_with_one_line_that_says_what_there_is(kwargs, message):
    with pytest.raises(LookupFailed) as err:
        lookup(**kwargs)
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


#: The frameworks, modes, dtypes and devices a message names when it refuses an unknown one (issue 44, item 8).
_KNOWN = "(known: torch, jax, tensorflow"


@pytest.mark.parametrize("call, message", [
    (lambda: lookup(CLAMP, path=123), "path must be a path (str or os.PathLike) to observations.parquet or its "
                                      "folder, not int 123"),
    (lambda: lookup(CLAMP, path=["reports"]), "path must be a path (str or os.PathLike)"),
    (lambda: lookup(CLAMP, path="reports\0x"), "holds a NUL character"),
    (lambda: lookup(CLAMP, framework="nope"), f"unknown framework 'nope' {_KNOWN}"),
    (lambda: lookup(CLAMP, framework=7), "framework must be a string, not int 7"),
    (lambda: lookup(CLAMP, mode=True), "mode must be a string, not bool True"),
    (lambda: lookup(CLAMP, dtype="float8"), "unknown dtype 'float8' (known: float64, float32, float16, bfloat16)"),
    (lambda: lookup(CLAMP, device="tpu"), "unknown device 'tpu' (known: cpu, cuda, metal)"),
    (lambda: lookup(""), "program is empty"),
    (lambda: lookup(CLAMP, case="  "), "case is empty"),
    (lambda: lookup(CLAMP, release=2.14), "release must be a string, not float 2.14"),
    (lambda: lookup(CLAMP, case="relu@0", platform="macos_arm64"),
     "no platform 'macos_arm64' for this query (there are: linux_x86_64"),
    (lambda: lookup("x" * 500), "no program 'xxxx"),
    (lambda: lookup(["torch.relu(x)"] * 40), "program must be a string, not list"),
    (lambda: search("clamp", framework="nope"), f"unknown framework 'nope' {_KNOWN}"),
    (lambda: search("clamp", framework=1), "framework must be a string, not int 1"),
    (lambda: search(b"clamp"), "search for a name (a string), not bytes"),
    (lambda: kinkcheck.report.query.operations("nope"), f"unknown framework 'nope' {_KNOWN}"),
    (lambda: data_path(3), "name must be a file name of the report data"),
    (lambda: data_path("../observations.parquet"), "name must be a file name of the report data"),
    (lambda: nearest_programs(CLAMP, "torch.relu(x)"), "programs must be a list of strings, not str"),
    (lambda: nearest_programs(CLAMP, [CLAMP], n=-1), "n must be a count (an int >= 0), not int -1"),
    (lambda: nearest_programs(None, [CLAMP]), "program must be a string, not NoneType"),
    (lambda: kinkcheck.report.query.calls_of(3), "program must be a string, not int 3"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_every_bad_argument_of_the_api_is_lookup_failed_in_one_line(call, message):
    """Issue 44, item 8: the API's errors are its own: a TypeError or an empty answer was a bad argument."""
    with pytest.raises(LookupFailed) as err:
        call()
    text = str(err.value)
    assert message in text, f"expected {message!r} in {text!r}"
    assert "\n" not in text and len(text) < 400, f"one short line: {text!r}"
    assert isinstance(err.value, kinkcheck.LookupFailed), "kinkcheck.LookupFailed, which callers catch"


def test_lookup_takes_the_report_folder_as_the_faces_do_and_refuses_an_empty_path():
    rows = lookup(CLAMP, case="relu@0", release="2.14.1", path=ROOT / "reports")
    assert [r.value for r in rows] == [{"x": 0.0}], "the folder stands for its observations.parquet, as --report"
    with pytest.raises(LookupFailed, match="path is empty"):
        lookup(CLAMP, path="")


@pytest.mark.parametrize("fault", FAULTS)
def test_lookup_refuses_a_damaged_or_mixed_table_in_one_line(faulty_report, monkeypatch, fault):
    """Issue 44, item 6: a damaged observations.parquet gave lookup a traceback (KeyError, TypeError, msgspec's
    DecodeError) and a mixed set was read without a word. Each is one line naming the table: ReportUnreadable, a
    LookupFailed, from a folder named by path= or by $KINKCHECK_REPORTS."""
    from damage import SAYS

    folder = faulty_report(fault)
    for where in ("path", "env"):
        if where == "env":
            monkeypatch.setenv("KINKCHECK_REPORTS", str(folder))
        with pytest.raises(LookupFailed) as err:
            lookup(CLAMP, case="relu@0", release="2.14.1", path=folder if where == "path" else None)
        said = str(err.value)
        assert isinstance(err.value, ReportUnreadable), f"{fault} ({where}): {type(err.value).__name__}: {said}"
        assert "\n" not in said and str(folder / "observations.parquet") in said and SAYS[fault] in said, \
            f"{fault} ({where}): one line naming the table and what is wrong: {said}"


def test_a_table_changed_in_place_is_checked_again(tmp_path):
    """check_one_render keeps a result while neither file changes: a table replaced by another render's after a
    good lookup is refused by the next lookup of the same process; a table with no report beside it is read."""
    import shutil

    from damage import damaged_report

    folder = tmp_path / "report"
    folder.mkdir()
    for name in ("observations.parquet", "conventions.json.gz"):
        shutil.copy(ROOT / "reports" / name, folder / name)
    assert lookup(CLAMP, case="relu@0", release="2.14.1", path=folder), "one render: read"
    shutil.copy(damaged_report(tmp_path / "mixed", "mixed") / "observations.parquet", folder / "observations.parquet")
    with pytest.raises(ReportUnreadable, match="does not belong to"):
        lookup(CLAMP, case="relu@0", release="2.14.1", path=folder)
    (folder / "conventions.json.gz").unlink()
    assert lookup(CLAMP, case="relu@0", release="2.14.1", path=folder), "a table alone is a set of one"


def test_nearest_programs_are_the_catalog_spellings_nearest_the_question():
    programs = [CLAMP, "torch.clamp_min(x, 0)", "torch.relu(x)", "jax.numpy.clip(x, 0)", "torch.clamp(x, 0, 6)"]
    near = nearest_programs("torch.clamp(x, 0)", programs)
    assert near[:2] == ["torch.clamp(x, 0, 6)", CLAMP] and near[2] == "torch.clamp_min(x, 0)", \
        f"the programs that call torch.clamp first, then the nearest text: {near}"
    assert nearest_programs("something else entirely", programs) == []


def test_search_finds_every_case_that_calls_an_operation():
    """"clamp" finds torch.clamp and the .clamp method with their cases (relu@0 among them, which nobody
    guesses from the name), and nothing that merely starts with clamp."""
    ops = {(o.framework, o.name): o for o in search("clamp")}
    assert ("torch", "torch.clamp") in ops and ("torch", ".clamp") in ops, sorted(ops)
    assert "relu@0" in ops["torch", "torch.clamp"].cases and CLAMP in ops["torch", "torch.clamp"].programs
    assert ops["torch", "torch.clamp"].kink, "what the census says of its kink"
    assert not any(name.endswith("clamp_min") for _, name in ops), "clamp_min is another operation"
    jax_ops = search("clip", framework="jax")
    assert jax_ops and all(o.framework == "jax" for o in jax_ops) and any(o.name == "jax.numpy.clip" for o in jax_ops)
    with pytest.raises(LookupFailed, match="search for what"):
        search("  ")
    with pytest.raises(LookupFailed, match=r"a name \(a string\), not NoneType"):
        search(None)  # type: ignore[arg-type]


def test_data_is_found_in_the_source_tree_or_a_named_folder(tmp_path, monkeypatch):
    assert data_path() == ROOT / "reports" / "observations.parquet"
    monkeypatch.chdir(tmp_path)
    assert default_report() == ROOT / "reports" / "conventions.json.gz", "from any folder: the source tree's"
    monkeypatch.setenv("KINKCHECK_REPORTS", str(tmp_path))
    with pytest.raises(LookupFailed, match=r"no observations.parquet in .* \(\$KINKCHECK_REPORTS\)"):
        lookup(CLAMP)
    (tmp_path / "observations.parquet").write_text("not parquet")
    with pytest.raises(LookupFailed, match="not a Parquet file"):
        lookup(CLAMP)


def test_import_kinkcheck_needs_nothing_beyond_the_standard_library():
    """The noxfile imports kinkcheck's registry under nox's own Python, which has none of its dependencies (the
    CI run of stop 30 broke on ``import msgspec``): ``import kinkcheck`` and the registry import nothing else."""
    code = ("import sys\nfor m in ('msgspec', 'pyarrow', 'numpy', 'sympy', 'orjson'):\n    sys.modules[m] = None\n"
            "import kinkcheck, kinkcheck.registry\nprint(kinkcheck.__version__, len(kinkcheck.registry.FRAMEWORKS))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 0 and proc.stdout.split()[0] == kinkcheck.__version__, proc.stderr[-1500:]


def _run(args: list[str], cwd: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KINKCHECK_REPORTS"}
    env.update(PYTHONPATH=str(site), KINKCHECK_CACHE_DIR=str(cwd / "cache"))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def test_an_installed_wheel_outside_the_repository_answers_from_its_own_data(tmp_path):
    """Issue 31: the wheel ships the report's data (kinkcheck/data/reports/), so lookup, grad, cite and migrate
    answer from a folder outside the repository, without the source tree. The wheel is built by hatchling (the
    build backend) and unpacked as an installer would; PYTHONPATH puts it before the editable install."""
    build = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path / "dist")],
                           cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("kinkcheck-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {"kinkcheck/data/reports/observations.parquet", "kinkcheck/data/reports/conventions.json.gz",
                "kinkcheck/data/catalog.toml"} <= names, sorted(n for n in names if "/data/" in n)[:20]
        zf.extractall(tmp_path / "site")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    site = tmp_path / "site"
    (tmp_path / "reports").mkdir()  # beside the installed copy: someone else's folder, never its data
    (tmp_path / "reports" / "observations.parquet").write_text("not the package's data")
    (tmp_path / "references").mkdir()
    (tmp_path / "references" / "catalog.toml").write_text("not the package's catalog")
    probe = _run(["-c", "import kinkcheck, kinkcheck.report.query as q; print(kinkcheck.__file__); print(q.data_path()); "
                  f"print(kinkcheck.lookup({CLAMP!r}, case='relu@0', release='2.14.1'))"], outside, site)
    assert probe.returncode == 0, probe.stderr[-2000:]
    where, data, row = probe.stdout.splitlines()[:3]
    assert where.startswith(str(site)) and data.startswith(str(site / "kinkcheck" / "data" / "reports")), \
        (where, data)
    assert row == "torch 2.14.1 cpu reverse float64  relu@0  torch.clamp(x, min=0): 0 (left)", probe.stdout
    grad = _run(["-m", "kinkcheck", "grad", CLAMP, "--at", "x=0", "--no-isolate"], outside, site)
    assert grad.returncode == 0 and "report (" in grad.stdout and "no report" not in grad.stdout, \
        grad.stdout[-1500:] + grad.stderr[-1500:]
    clamp_row = next(ln for ln in grad.stdout.splitlines() if "torch.clamp(x, min=0)" in ln and "this program" in ln)
    assert "1 (right) 1.13.1–2.13.0 · 0 (left) 2.14.1–2.15.0" in clamp_row, clamp_row
    cite = _run(["-m", "kinkcheck", "cite", CLAMP], outside, site)
    assert cite.returncode == 0 and "In PyTorch 2.15.0" in cite.stdout and "is 0 (left" in cite.stdout and \
        "@misc{" in cite.stdout, cite.stdout[-1500:] + cite.stderr[-1500:]
    migrate = _run(["-m", "kinkcheck", "migrate", "--from", "torch==2.13.0", "--to", "torch==2.15.0"], outside, site)
    assert migrate.returncode == 0 and "torch.clamp(x, min=0)" in migrate.stdout, migrate.stderr[-2000:]


def test_a_method_form_shared_by_frameworks_finds_each_framework_s_spelling():
    """Issue 44: x.clamp(min=0.0) is MindSpore's own program and torch's x.clamp(min=0): lookup finds both, the
    closest spelling each framework holds."""
    rows = lookup("x.clamp(min=0.0)", case="relu@0")
    by_framework = {(r.framework, r.program) for r in rows}
    assert ("torch", "x.clamp(min=0)") in by_framework and ("mindspore", "x.clamp(min=0.0)") in by_framework, \
        sorted(by_framework)
    assert lookup("x.clamp(min=0.0)", case="relu@0", framework="torch", release="2.14.1")[0].value == {"x": 0.0}


# --------------------------------------------------------------------------- issue 46, item 2: only the rows asked


@pytest.fixture()
def read_groups(monkeypatch):
    """The row groups pyarrow is asked for, in order (``ParquetFile.read_row_group`` observed)."""
    import pyarrow.parquet as pq

    asked: list[int] = []
    real = pq.ParquetFile.read_row_group

    def spy(self, i, *args, **kwargs):
        asked.append(i)
        return real(self, i, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    return asked


def _index_of(table: Path) -> dict:
    import json

    import pyarrow.parquet as pq

    from kinkcheck.report.query import ROW_GROUPS

    return json.loads(pq.ParquetFile(table).metadata.metadata[ROW_GROUPS])


def test_read_table_asks_pyarrow_only_for_the_row_groups_of_the_cases_and_programs_asked(shards_report_files,
                                                                                          read_groups):
    """A filter on case or program reads the groups the table's index names for them, and the rows are those
    pyarrow's own filtered read of the whole file gives, in the same order."""
    import pyarrow.parquet as pq

    from kinkcheck.report.query import read_table

    table = shards_report_files.parent / "observations.parquet"
    total = pq.ParquetFile(table).metadata.num_row_groups
    index = _index_of(table)
    for filters, groups in (
            ([("case", "in", ["relu@0", "cond@0"]), ("mode", "==", "reverse"), ("dtype", "==", "float64")],
             set(index["case"]["relu@0"]) | set(index["case"]["cond@0"])),
            ([("program", "==", CLAMP), ("device", "==", "cpu")], set(index["program"][CLAMP])),
            ([("case", "==", "relu@0"), ("program", "in", [CLAMP, "torch.relu(x)"])],
             set(index["case"]["relu@0"]) & (set(index["program"][CLAMP]) | set(index["program"]["torch.relu(x)"])))):
        read_groups.clear()
        got = read_table(table, filters, columns=["case", "program", "framework_version", "value"])
        assert read_groups == sorted(groups) and 0 < len(read_groups) < total / 4, \
            f"{filters}: read groups {read_groups} of {total}, the index names {sorted(groups)}"
        want = pq.read_table(table, filters=filters, columns=["case", "program", "framework_version", "value"])
        assert got.num_rows > 0 and got.to_pylist() == want.to_pylist(), f"{filters}: the rows a full read gives"
    read_groups.clear()
    assert read_table(table, [("case", "==", "no-such-case")]).num_rows == 0 and read_groups == [], \
        "a case the table does not hold: no group read, no row"


def test_filters_on_the_groups_read_are_pyarrow_s_own(shards_report_files):
    """The other filters are applied to the groups read with pyarrow's operators, as its filtered read does: !=,
    not in, ordering, and a null (an error row's value) passes no comparison."""
    import pyarrow.parquet as pq

    from kinkcheck.report.query import read_table

    table = shards_report_files.parent / "observations.parquet"
    for extra in ([("dtype", "!=", "float64")], [("mode", "not in", ["reverse", "vmap"])],
                  [("framework_version", ">=", "2.1"), ("framework_version", "<", "2.14")],
                  [("value", "==", '{"x":0.0}')], [("error", "!=", "")]):
        filters = [("case", "in", ["relu@0", "abs@0"]), *extra]
        got = read_table(table, filters).to_pylist()
        assert got == pq.read_table(table, filters=filters).to_pylist(), f"{extra}: as pyarrow filters"
    with pytest.raises(kinkcheck.report.query.DatasetError, match="filter operator 'like'"):
        read_table(table, [("case", "==", "relu@0"), ("program", "like", "torch%")])


def test_a_table_rewritten_in_place_is_read_anew(shards_report_files, tmp_path):
    """The footer a reader parsed is kept for the process (cite reads the index, then the rows, of one file), but
    only while the file is unchanged: a table written again at the same path is read with its own footer."""
    import pyarrow.parquet as pq

    from kinkcheck.report.query import ROW_GROUPS, file_metadata, read_table

    src = shards_report_files.parent / "observations.parquet"
    path = tmp_path / "observations.parquet"
    path.write_bytes(src.read_bytes())  # alone: a set of one
    before = read_table(path, [("program", "==", CLAMP)]).num_rows
    t = pq.read_table(src)
    meta = {k: v for k, v in file_metadata(src).items() if k != ROW_GROUPS}  # no index: statistics prune
    pq.write_table(t.filter(pq.ParquetFile(src).read().column("framework").to_numpy(zero_copy_only=False) == "torch")
                   .replace_schema_metadata(meta), path, row_group_size=1000)
    after = read_table(path, [("program", "==", CLAMP)])
    assert before > 0 and after.num_rows == before, "torch's rows of a torch program: the same count"
    assert pq.ParquetFile(path).metadata.num_row_groups != pq.ParquetFile(src).metadata.num_row_groups
    assert read_table(path, [("program", "==", "jax.nn.relu(x)")]).num_rows == 0, "the new file's rows, not the old"


def test_another_framework_s_program_says_whose_it_is_not_that_the_case_is_missing():
    """Issue 46: torch's program asked of jax at relu@0 has no jax row anywhere: the message names the framework
    (whose program it is, and how to find jax's), not "no case 'relu@0' (there are: none)", which was false."""
    for kw in ({"case": "relu@0", "framework": "jax"}, {"framework": "jax"}, {"case": "abs@0", "framework": "jax"},
               {"release": "0.4.13", "framework": "jax"}, {"mode": "jit", "framework": "jax"}):
        with pytest.raises(LookupFailed) as err:
            lookup(CLAMP, **kw)
        assert str(err.value) == (f"no framework 'jax' for this query: {CLAMP} is measured in torch only; "
                                  "kinkcheck.search('clamp', framework='jax') lists jax's programs that call it"), kw
    assert kinkcheck.search("clamp", framework="jax"), "the search the message names finds jax's clamp"
    for program, framework, says in (
            ("x.clamp(min=0)", "tensorflow", "x.clamp(min=0) and x.clamp(min=0.0) are measured in mindspore and torch "
             "only; no tensorflow program of the catalog calls an operation named 'clamp' (kinkcheck.search('clamp') "
             "lists every framework's)"),
            ("-torch.max(-v)", "jax", "-torch.max(-v) is measured in torch only; kinkcheck.search('max', "
             "framework='jax') lists jax's programs that call it")):
        with pytest.raises(LookupFailed) as err:
            lookup(program, framework=framework)
        assert str(err.value) == f"no framework {framework!r} for this query: {says}", err.value
    with pytest.raises(LookupFailed, match=r"no case 'relu@9' for this query \(there are: relu@-0.0, relu@-1e-45, "):
        lookup(CLAMP, case="relu@9", framework="torch")


def test_a_program_s_rows_are_kept_as_runs_of_the_groups_read(shards_report_files, monkeypatch):
    """Issue 46: the rows of a program (of a case), and of its releases, modes and dtypes among them, are kept as
    slices of each row group (a run per release: the file is sorted by case, then program), without importing
    pyarrow.compute (a tenth of a second of a cold `cite`); they are the rows pyarrow's filtered read gives, in its
    order; past the most runs kept as slices, a computed mask gives the same rows."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from kinkcheck.report.query import read_table

    table = shards_report_files.parent / "observations.parquet"
    cases = [("program", "==", CLAMP)]
    for filters in (cases, [*cases, ("case", "==", "relu@0"), ("mode", "==", "reverse"), ("dtype", "==", "float32")],
                    [*cases, ("framework_version", "in", ["2.13.0", "2.14.1"]), ("dtype", "in", ["float16"])],
                    [("program", "in", [CLAMP, "torch.relu(x)"]), ("device", "==", "cuda")],
                    [*cases, ("mode", "==", "no-such-mode")]):
        want = pq.read_table(table, filters=filters).to_pylist()
        assert read_table(table, filters).to_pylist() == want, f"{filters}: as pyarrow filters"
        monkeypatch.setattr(kinkcheck.report.query, "_MAX_RUNS", 0)  # every run past the most: a computed mask
        assert read_table(table, filters).to_pylist() == want, f"{filters}: the mask's rows are the runs' rows"
        monkeypatch.undo()
    probe = ("import sys\nfrom kinkcheck.report.query import read_table\n"
             f"t = read_table({str(table)!r}, [('program', '==', {CLAMP!r}), ('case', '==', 'relu@0'), "
             "('mode', '==', 'reverse'), ('dtype', '==', 'float64')])\n"
             "print(t.num_rows, 'pyarrow.compute' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert int(out[0]) > 0 and out[1] == "False", f"one cell's rows, read without pyarrow.compute: {out}"


def test_lookup_reads_a_table_with_its_index_as_one_without(shards_report_files, tmp_path, read_groups):
    """The same rows written in the layout before issue 46 (sorted by program, no row-group index) and as a render
    writes them now give the same lookups, rows in the same order (program, the report's order of cases, then
    environments oldest release first; x ** 0.5 is torch's, jax's and autograd's), and the new one reads a few
    groups."""
    import pyarrow.parquet as pq

    from kinkcheck.report.query import ROW_GROUPS, file_metadata

    new = tmp_path / "new"
    old = tmp_path / "old"
    for folder in (new, old):
        folder.mkdir()
    src = shards_report_files.parent / "observations.parquet"
    (new / "observations.parquet").write_bytes(src.read_bytes())  # alone: a set of one
    t = pq.read_table(src)
    meta = {k: v for k, v in file_metadata(src).items() if k != ROW_GROUPS}  # a table written before the index
    pq.write_table(t.sort_by([("program", "ascending")]).replace_schema_metadata(meta), old / "observations.parquet",
                   row_group_size=8192, compression="zstd")
    total = pq.ParquetFile(src).metadata.num_row_groups
    for program, kw in ((CLAMP, {}), ("x ** 0.5", {"mode": None, "dtype": None, "device": None}),
                        ("torch.relu(x)", {"case": "relu@0", "release": "2.14.1", "mode": None})):
        before = lookup(program, path=old, **kw)
        read_groups.clear()
        after = lookup(program, path=new, **kw)
        assert after and list(after) == list(before), f"{program} {kw}: the same rows in the same order"
        assert len(set(read_groups)) < total / 4, f"{program}: groups read {sorted(set(read_groups))} of {total}"
    fws = [r.framework for r in lookup("x ** 0.5", path=new, case="sqrt@0", release=None, mode="reverse")]
    assert len(set(fws)) > 1 and fws == sorted(fws, key=fws.index), f"one framework's releases together: {fws}"
    with pytest.raises(LookupFailed, match=r"no release '9.9' for this query \(there are: 1.13.1"):
        lookup(CLAMP, path=new, case="relu@0", release="9.9")


@pytest.mark.parametrize(("index", "says"), [
    (b'{"case": {"relu@0": [100000]}, "program": {}}', "its row-group index names row group 100000, the file has"),
    (b'{"case": ["relu@0"]}', "its row-group index (kinkcheck.row_groups) is not a mapping"),
])
def test_a_damaged_row_group_index_is_one_line(shards_report_files, tmp_path, index, says):
    """An index naming a group the file lacks, or not a mapping: ReportUnreadable, one line naming it."""
    import pyarrow.parquet as pq

    from kinkcheck.report.query import ROW_GROUPS, file_metadata

    src = shards_report_files.parent / "observations.parquet"
    t = pq.read_table(src)
    pq.write_table(t.replace_schema_metadata({**file_metadata(src), ROW_GROUPS: index}),
                   tmp_path / "observations.parquet")
    with pytest.raises(ReportUnreadable) as err:  # alone: a set of one; a case, so the index is read
        lookup(path=tmp_path, case="relu@0")
    assert says in str(err.value) and "\n" not in str(err.value) and "render it again" in str(err.value), str(err.value)
