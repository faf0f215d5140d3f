"""The Markdown report (kinkcheck.render.markdown, .view): the index page and one page per case, rendered
from the report built from the committed shards (``shards_report``, tests/conftest.py). Expectations are
computed here from the observations themselves, not from the view, so a renderer that merges, drops or
mislabels a release fails."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

import msgspec
import pytest
from conftest import torch_2_15_elsewhere

from kinkcheck.oracles.classify import same_value
from kinkcheck.vocabulary import flat_value
from kinkcheck.registry import FRAMEWORKS
from kinkcheck.render.markdown import SECTION_PAGES, render_case_pages, render_markdown, render_section_pages
from kinkcheck.report.model import release_ranges
from kinkcheck.render.view import DTYPE_SHORT, LABEL_MARK, NO_OBSERVATION, case_file, fmt_value, row_anchor, slug

SHA = "ab" * 32
LIMIT = 200_000  # bytes a code host renders comfortably (issue 12)


@pytest.fixture(scope="module")
def index(shards_report):
    return render_markdown(shards_report, json_sha256=SHA)


@pytest.fixture(scope="module")
def pages(shards_report):
    return render_case_pages(shards_report, json_sha256=SHA)


@pytest.fixture(scope="module")
def sections(shards_report):
    return render_section_pages(shards_report, json_sha256=SHA)


def _face(ob) -> str:
    return f"{fmt_value(ob.value)} <sub>{ob.labels[0]}</sub>" if ob.status == "ok" else ob.status


def _shown(a, b) -> bool:
    """Whether dtype ``b`` is listed beside ``a``: another status or label, or a value beyond b's tolerance."""
    if a.status != b.status or (a.status == "ok" and a.labels[0] != b.labels[0]):
        return True
    return a.status == "ok" and not same_value(flat_value(a.value), flat_value(b.value), b.dtype)


def _expected_runs(report, case: str, fw: str, program: str) -> list[str]:
    """``releases: value <sub>label</sub> (f16: …)`` per run of equal releases, from the observations."""
    idx = report.index
    envs = [e for e in idx.columns[fw] if e.device == "cpu" and not e.isa_cap]  # a lower x86-64 level: isa-levels.md
    keys = []
    for e in envs:
        obs = [o for o in idx.by_environment[e.id] if o.case == case and o.program == program and o.mode == "reverse"]
        obs.sort(key=lambda o: idx.dtypes.index(o.dtype))
        first = _face(obs[0]) if obs else "—"
        others = [f"{DTYPE_SHORT[o.dtype]}: {_face(o)}" for o in obs[1:] if _shown(obs[0], o)]
        keys.append(first + (f" ({'; '.join(others)})" if others else ""))
    runs: list[tuple[list[str], str]] = []
    for e, k in zip(envs, keys):
        if runs and runs[-1][1] == k:
            runs[-1][0].append(e.id)
        else:
            runs.append(([e.id], k))
    return [f"{release_ranges(ids, envs)}: {k}" for ids, k in runs]


def _row(page: str, anchor: str) -> str:
    line = next((ln for ln in page.splitlines() if ln.startswith(f'| <a id="{anchor}"></a>')), None)
    assert line is not None, f"no table row with anchor {anchor}"
    return line


def test_values_over_releases_are_ranges(shards_report, pages):
    """A program whose convention changed shows one range per value, in release order."""
    change = next(c for c in shards_report.changed_in if c.kind == "convention" and c.framework == "torch"
                  and "reverse" in c.modes and "float64" in c.dtypes)
    case = change.cases[0]
    row = _row(pages[case_file(case)], row_anchor(case, "torch", change.program))
    expected = _expected_runs(shards_report, case, "torch", change.program)
    assert len(expected) >= 2, f"{change.program} changed between {change.from_version} and {change.to_version}"
    assert "<br>".join(expected) in row, f"values over releases of {change.program} at {case}:\n{row}"
    assert f" – {change.from_version}: " in row and f"{change.to_version}" in row, \
        f"the change {change.from_version} → {change.to_version} is a boundary between two ranges: {row}"


def test_every_row_of_every_page_is_its_observations(shards_report, pages):
    for case in shards_report.cases:
        page = pages[case_file(case.id)]
        for p in case.programs:
            row = _row(page, row_anchor(case.id, p.framework, p.program))
            if p.framework not in shards_report.index.columns:
                assert "| not measured |" in row, f"{case.id} {p.program}: a framework without a shard says so: {row}"
                continue
            want = "<br>".join(_expected_runs(shards_report, case.id, p.framework, p.program))
            assert want.replace("|", "\\|") in row, f"{case.id} {p.program}: want {want!r} in {row!r}"


def test_other_dtypes_only_where_they_differ(shards_report, pages):
    """relu@0, torch.relu(x): float16 raised in 1.13.1 and 2.0.1 (shown), and equals float64 from 2.1.2 on
    (not repeated), on CUDA too (2.11.0, a line of its own)."""
    idx = shards_report.index
    f16_old = idx.cell[("relu@0", "torch", "torch.relu(x)", "reverse", "torch-1.13.1-cpu", "float16")]
    f16_new = idx.cell[("relu@0", "torch", "torch.relu(x)", "reverse", "torch-2.15.0-cpu", "float16")]
    f64_new = idx.cell[("relu@0", "torch", "torch.relu(x)", "reverse", "torch-2.15.0-cpu", "float64")]
    assert f16_old.status == "error" and _face(f16_new) == _face(f64_new), "the premise: measured shards"
    row = _row(pages["relu-at-0.md"], "case-relu-at-0--torch-torch-relu-x")
    assert ("| 1.13.1, 2.0.1: 0 <sub>left</sub> (f16: error)<br>2.1.2 – 2.15.0: 0 <sub>left</sub><br>"
            "2.11.0 cuda: 0 <sub>left</sub> |") in row, row
    assert row.count("f16") == 1 and "bf16" not in row and "f32" not in row, f"equal dtypes repeated: {row}"


def test_a_lower_dtype_within_its_tolerance_is_not_repeated(shards_report, pages):
    """max@[1,0,1,0,1,0], torch.max(v): float16 holds 1/3 as 0.333252, the same value to float16's tolerance."""
    f16 = shards_report.index.cell[("max@[1,0,1,0,1,0]", "torch", "torch.max(v)", "reverse", "torch-2.15.0-cpu",
                                    "float16")]
    assert fmt_value(f16.value).startswith("[0.333252"), f"the premise: {fmt_value(f16.value)}"
    row = _row(pages[case_file("max@[1,0,1,0,1,0]")], row_anchor("max@[1,0,1,0,1,0]", "torch", "torch.max(v)"))
    assert "0.333252" not in row and "f16" not in row, f"float16 rounding shown as a difference: {row}"


def test_changed_in_is_one_row_per_change_with_its_modes(shards_report, sections, pages):
    """The jax linalg.norm(v, inf) change 0.4.38 → 0.5.3 happened in every jax mode: one row lists them."""
    prog = "jax.numpy.linalg.norm(v, jax.numpy.inf)"
    modes = {o.mode for o in shards_report.index.observations(case="norminf@origin", program=prog,
                                                               environment="jax-0.5.3-cpu")}
    assert len(modes) > 2, "the premise: several modes measured"
    for text, where in ((sections["changed-in.md"], "changed-in.md"), (pages["norminf-at-origin.md"], "the case page")):
        rows = [ln for ln in text.splitlines() if f"`{prog}`" in ln and "0.4.38 → 0.5.3" in ln]
        assert len(rows) == 1, f"{where}: one row for the change, not one per mode: {rows}"
        cells = [c.strip() for c in rows[0].split(" | ")]
        listed = next(c for c in cells if "reverse" in c and "jit" in c)
        assert set(listed.split(", ")) == {m for m in modes if m != "second-order"} or \
            set(listed.split(", ")) == modes, f"{where}: modes of the change: {listed} vs measured {sorted(modes)}"


def test_summary_separates_convention_from_availability_changes(shards_report, index, sections):
    for v in shards_report.version_span:
        lines = index.splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith(f"- {v.framework}, {v.oldest} against"))
        item = " ".join(" ".join(lines[at:at + 4]).split())
        assert f"pairs: {v.programs_changed} return" in item or f"pairs: {v.programs_changed} returns" in item, item
        assert f"{v.programs_raises} raised in one release" in item, item
        assert f"{v.programs_gained} gained and {v.programs_lost} lost" in item, item
    s = shards_report.summary
    flat = " ".join(index.split())
    assert (f"{s.changed_in_conventions} convention changes, {s.changed_in_raises} between raising and returning a "
            f"value, {s.changed_in_availability} availability changes") in flat, "the summary names the three kinds"
    page = sections["changed-in.md"]
    part = page[page.index("section-changed-in-conventions"):page.index("### Raising and returning")]
    rows = sum(1 for ln in part.splitlines() if ln.startswith(tuple(f"| {fw} |" for fw in FRAMEWORKS)))
    assert rows == s.changed_in_conventions, "every convention change has its row on changed-in.md"
    raises = [ln for ln in sections["changed-in-raises.md"].splitlines()
              if ln.startswith(tuple(f"| {fw} |" for fw in FRAMEWORKS))]
    programs = sum(ln.split(" | ")[2].count("<br>") + 1 for ln in raises)
    assert programs == s.changed_in_raises, "every raises change has its program on changed-in-raises.md"
    assert len(raises) <= programs, "programs that changed alike share a row"
    assert "[`changed-in.md`](changed-in.md)" in index, "the index links the page"


def test_pages_are_small_enough_for_a_code_host(index, pages, sections, shards_report):
    assert len(pages) == len(shards_report.cases), "one page per case"
    assert len(index.encode()) <= LIMIT, f"index is {len(index.encode())} bytes"
    assert set(sections) == set(SECTION_PAGES)
    big = {name: len(text.encode()) for name, text in sections.items() if len(text.encode()) > LIMIT}
    assert not big, f"section pages over {LIMIT} bytes: {big}"
    big = {name: len(text.encode()) for name, text in pages.items() if len(text.encode()) > LIMIT}
    assert not big, f"case pages over {LIMIT} bytes: {big}"


def _anchors(text: str) -> list[str]:
    return re.findall(r'<a id="([^"]+)"', text)


def test_every_link_lands_on_an_anchor(index, pages, sections):
    files = {"conventions.md": index, **sections, **{f"cases/{name}": text for name, text in pages.items()}}
    anchors = {}
    for name, text in files.items():
        found = _anchors(text)
        dup = {a for a in found if found.count(a) > 1}
        assert not dup, f"{name}: anchors defined twice: {sorted(dup)[:5]}"
        anchors[name] = set(found)
    broken = []
    for name, text in files.items():
        here = PurePosixPath(name).parent
        for target, frag in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", text):
            path = name if not target else str(PurePosixPath(*(here / target).parts))
            parts: list[str] = []
            for part in PurePosixPath(path).parts:  # resolve ".." without touching the file system
                if part == "..":
                    parts.pop()
                else:
                    parts.append(part)
            path = "/".join(parts)
            if path not in anchors or frag not in anchors[path]:
                broken.append(f"{name}: {target}#{frag}")
    assert not broken, f"{len(broken)} links to no anchor, e.g. {broken[:5]}"


def test_cited_anchors_exist(pages, index):
    """The anchors kinkcheck cite links to: case, program row, release of a row, mode of a row."""
    page = pages["relu-at-0.md"]
    row = "case-relu-at-0--torch-torch-clamp-x-min-0"
    for a in ("case-relu-at-0", row, f"{row}--torch-2-13-0-cpu", f"{row}--modes", f"{row}--modes--inductor"):
        assert f'<a id="{a}"' in page, f"anchor {a} on relu@0's page"
    assert '<a id="case-relu-at-0"></a>[relu@0](cases/relu-at-0.md#case-relu-at-0)' in index, \
        "the index keeps the case anchor (old links to conventions.md#case-… land on the list of cases)"
    assert '<a id="env-torch-2-13-0-cpu"></a>' in index


def test_strip_colours_follow_labels(shards_report, pages):
    idx = shards_report.index
    squares = 0
    for case in shards_report.cases:
        page = pages[case_file(case.id)]
        for p in case.programs:
            anchor = row_anchor(case.id, p.framework, p.program)
            for env in idx.columns.get(p.framework, []):
                if env.isa_cap:  # a release at a lower x86-64 level has no square: its differences are isa-levels.md's
                    assert f'id="{anchor}--{slug(env.id)}"' not in page, f"{case.id} {p.program}: {env.id} squared"
                    continue
                ob = idx.cell.get((case.id, p.framework, p.program, "reverse", env.id, "float64"))
                want = NO_OBSERVATION.emoji if ob is None else LABEL_MARK[ob.labels[0]].emoji
                m = re.search(rf'<a id="{re.escape(anchor)}--{slug(env.id)}" title="[^"]*">([^<]+)</a>', page)
                assert m, f"{case.id} {p.program}: no square for {env.id}"
                assert m.group(1) == want, f"{case.id} {p.program} {env.id}: square {m.group(1)} for " \
                                           f"{ob.labels[0] if ob else 'no observation'}, want {want}"
                squares += 1
    assert squares > 3000, "every release of every program has a square"


def test_each_label_has_its_own_square_and_a_legend_line(index):
    marks = {lb: m.emoji for lb, m in LABEL_MARK.items() if lb not in ("+inf", "-inf")}
    assert len(set(marks.values())) == len(marks), "two labels share a square: a change between them is invisible"
    for lb, m in LABEL_MARK.items():
        assert f"| {m.emoji} | `{lb}` |" in index, f"legend line for {lb}"


def test_pages_name_the_json_and_are_deterministic(shards_report, index, pages):
    assert index.rstrip().endswith(f"`conventions.json` sha256 `{SHA}`"), "index footer names the JSON"
    assert all(p.rstrip().endswith(f"sha256 `{SHA}`") for p in pages.values()), "every page names the JSON"
    assert render_markdown(shards_report, json_sha256=SHA) == index, "byte-identical for the same report"
    bare = render_case_pages(shards_report)
    assert bare.keys() == pages.keys() and "sha256" not in bare["relu-at-0.md"], "no digest given: none named"


def test_an_unjudged_case_shows_why(shards_report):
    case = shards_report.cases[0]
    oracle = msgspec.structs.replace(case.oracle, kind="not-judged", reason="not judged: a test reason",
                                     clarke=None, left=None, right=None)
    cases = [msgspec.structs.replace(case, oracle=oracle), *shards_report.cases[1:]]
    summary = msgspec.structs.replace(shards_report.summary, cases_not_judged=1)
    report = msgspec.structs.replace(shards_report, cases=cases, summary=summary)
    page = render_case_pages(report)[case_file(case.id)]
    oracle_row = next(ln for ln in page.splitlines() if ln.startswith("| sympy |"))
    assert "not judged: a test reason" in oracle_row, oracle_row
    assert "the oracle finds **not judged**" in page and "Lipschitz)" not in page.split("## Oracle")[0], \
        "not judged: nothing said of its continuity"
    assert f"[{case.id}](cases/{case_file(case.id)}#case-{slug(case.id)})" in render_markdown(report).split(
        "could not judge")[1].splitlines()[0], "the summary links the unjudged case to its page"


def test_a_second_device_gets_its_own_line_and_squares(shards_report):
    """A CUDA shard of torch 2.15.0 (made here from the CPU one, relu@0 only, with one value changed): its
    releases are named with the device, on a line of their own, never merged into a CPU range."""
    report, _, _ = torch_2_15_elsewhere(shards_report, id="torch-2.15.0-cuda", device="cuda")
    page = render_case_pages(report)["relu-at-0.md"]
    row = _row(page, "case-relu-at-0--torch-torch-relu-x")
    assert "2.1.2 – 2.15.0: 0 <sub>left</sub><br>2.15.0 cuda: 1 <sub>right</sub> (f32: 0 <sub>left</sub>; " \
           "f16: 0 <sub>left</sub>; bf16: 0 <sub>left</sub>)" in row, row
    assert f'<a id="case-relu-at-0--torch-torch-relu-x--torch-2-15-0-cuda" title="2.15.0 cuda: 1 right">' \
           f'{LABEL_MARK["right"].emoji}</a>' in row, "the CUDA release has its square and anchor"


def test_another_platform_is_its_own_release_line_and_compared_with_linux(shards_report):
    """A macOS arm64 shard of torch 2.15.0 (made here from the Linux one, relu@0 only, one value changed): named
    with its platform, on a line of its own, its id ending in the platform tag; the difference from the Linux
    x86-64 shard is a "Linux x86-64 vs macOS arm64" row, and `cite` finds it at ``cpu-macos_arm64``."""
    from kinkcheck.answers.cite import cite
    from kinkcheck.judge.build import mode_disagreements

    report, cpu, mac = torch_2_15_elsewhere(shards_report, id="torch-2.15.0-cpu-macos_arm64",
                                             platform_tag="macos_arm64")
    assert mac.place == "cpu-macos_arm64" and mac.title == "2.15.0 macOS arm64" and cpu.place == "cpu"
    row = _row(render_case_pages(report)["relu-at-0.md"], "case-relu-at-0--torch-torch-relu-x")
    assert "2.15.0 macOS arm64: 1 <sub>right</sub>" in row and "2.1.2 – 2.15.0: 0 <sub>left</sub>" in row, row
    rows = [r for r in mode_disagreements(report).rows if r.comparison == "Linux x86-64 vs macOS arm64"]
    assert [(r.case, r.program, r.dtypes, r.environments) for r in rows] == [
        ("relu@0", "torch.relu(x)", ["float64"], [mac.id])], rows
    assert "no shard from another platform" not in " ".join(mode_disagreements(report).not_measured)
    assert "no shard from another platform" in " ".join(mode_disagreements(shards_report).not_measured)
    index = render_markdown(report)
    assert "torch 2.15.0: " in index and "torch 2.15.0 macOS arm64: " not in index, \
        "the cases index shows the newest Linux x86-64 release"
    from kinkcheck.judge.build import changed_in
    assert not [r for r in changed_in(report) if mac.id in (r.from_environment, r.to_environment)], \
        "no *Changed in* pair steps between platforms: releases are compared within one place"
    c = cite(report, "torch.relu(x)", case="relu@0", device="cpu-macos_arm64")
    assert c.environment.id == mac.id and "(CPU macOS arm64, float64, reverse mode)" in c.sentence, c.sentence
    assert cite(report, "torch.relu(x)", case="relu@0").environment.id == cpu.id, "cpu is Linux x86-64's"


def test_metal_is_compared_with_the_cpu_of_its_own_platform(shards_report):
    """A Metal shard of torch 2.15.0 (PyTorch's MPS backend; made here from the Linux CPU one, relu'(0) = 1):
    its place and title name device and platform; with no macOS CPU shard it is compared with Linux x86-64's
    CPU (both differences named), with one, with macOS's CPU (one difference); the coverage lines name the
    Metal device for torch and MLX, whose matrices have it, and say why JAX has no Metal environment."""
    from kinkcheck.judge.build import mode_disagreements

    report, _, metal = torch_2_15_elsewhere(shards_report, id="torch-2.15.0-metal-macos_arm64", device="metal",
                                            platform_tag="macos_arm64")
    assert metal.place == "metal-macos_arm64" and metal.title == "2.15.0 metal macOS arm64"
    md = mode_disagreements(report)
    relu = {(r.comparison, tuple(r.environments)) for r in md.rows
            if r.case == "relu@0" and r.program == "torch.relu(x)"}
    assert ("CPU Linux x86-64 vs Metal macOS arm64", (metal.id,)) in relu, relu
    assert not any(line.startswith("torch: CPU vs Metal") for line in md.not_measured), md.not_measured
    assert "mlx: CPU vs Metal not measured: no shard from a Metal device" in md.not_measured
    assert ("jax: CPU vs Metal not measured: its matrix has CPU, CUDA environments only (kinkcheck.registry)"
            in md.not_measured), md.not_measured
    both, _, mac = torch_2_15_elsewhere(report, id="torch-2.15.0-cpu-macos_arm64", platform_tag="macos_arm64")
    relu = {(r.comparison, tuple(r.environments)) for r in mode_disagreements(both).rows
            if r.case == "relu@0" and r.program == "torch.relu(x)"}
    assert ("Linux x86-64 vs macOS arm64", (mac.id,)) in relu, relu
    assert not any("Metal" in c for c, _ in relu), f"Metal and macOS's CPU agree (1): no row, {relu}"


def test_a_lower_instruction_set_level_is_compared_with_the_reference_on_its_own_page(shards_report):
    """Issue 49: a shard probed under an x86-64-v2 cap (made here from torch 2.15.0's, relu@0 only, one value
    changed) is its own environment, titled with its level, compared with the reference machine's level
    ("x86-64-v4 vs x86-64-v2", the Xeon's vector_isa), on isa-levels.md, never on the mode or devices pages."""
    from kinkcheck.judge.build import mode_disagreements

    capped = {e.id for e in shards_report.environments if e.isa_cap}  # the committed ones: made again here
    bare = msgspec.structs.replace(shards_report, environments=[e for e in shards_report.environments
                                                                if e.id not in capped],
                                   observations=[o for o in shards_report.observations if o.environment not in capped])
    cpu = bare.index.env["torch-2.15.0-cpu"]
    runner = {**cpu.runner, "isa_level": "x86-64-v3", "isa_cap": "x86-64-v2",
              "isa_settings": "ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41"}
    report, cpu, low = torch_2_15_elsewhere(bare, id="torch-2.15.0-cpu-linux_x86_64_v2",
                                            platform_tag="linux_x86_64_v2", runner=runner)
    assert cpu.isa_level == "x86-64-v4" and low.isa_level == "x86-64-v2", (cpu.runner, low.runner)
    assert low.place == "cpu-linux_x86_64_v2" and low.title == "2.15.0 Linux x86-64-v2", low.title
    rows = [r for r in mode_disagreements(report).rows if r.environments == [low.id] and " vs x86-64" in r.comparison]
    assert [(r.comparison, r.case, r.program, r.dtypes) for r in rows] == [
        ("x86-64-v4 vs x86-64-v2", "relu@0", "torch.relu(x)", ["float64"])], rows
    report = msgspec.structs.replace(report, mode_disagreements=mode_disagreements(report))  # as the build does
    sections = render_section_pages(report)
    page = sections["isa-levels.md"]
    table = page.split("## x86-64-v4 vs x86-64-v2: torch 2.15.0")[1].split("\n## ")[0]
    assert table.startswith(" (1 programs differ)"), table[:300]
    assert "| [relu@0](cases/relu-at-0.md) | `torch.relu(x)` | reverse | float64 | 0 left → 1 right |" in table, \
        "one row per case and set of programs that differ alike"
    assert "- **torch-2.15.0-cpu-linux_x86_64_v2**: x86-64-v2 (SSE4.2), capped (the CPU: x86-64-v3; " \
           "ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41)" in page and \
           "- **torch-2.15.0-cpu**: x86-64-v4 (AVX-512), the CPU's own" in page, "each level and how it was had"
    assert "x86-64-v4 vs" not in sections["mode-disagreements.md"] + sections["devices.md"]
    index = render_markdown(report)
    assert "torch 2.15.0 x86-64-v4 vs x86-64-v2: 1 programs" in index and "[`isa-levels.md`](isa-levels.md)" in index
    assert "programs return another value or raise at a lower x86-64 level" in index
    assert "torch: x86-64 instruction-set levels other than the reference machine's not measured: no shard probed " \
        "under a cap (kinkcheck probe --isa)" in mode_disagreements(bare).not_measured, "said where none is measured"
    assert not [line for line in mode_disagreements(report).not_measured if line.startswith("torch: x86-64")]


def test_paddles_bfloat16_abs_is_shown_per_level_with_the_cpus_error(shards_report, sections, pages):
    """Issue 49: the cell that failed the tests on an AVX2 CPU. The committed shards hold paddle 3.3.1 at the
    Xeon's x86-64-v4 (0) and at x86-64-v3 and -v2 (the framework's error on that CPU, in one line)."""
    page = sections["isa-levels.md"]
    for level, cpu in (("x86-64-v3", "this CPU capped at x86-64-v3 (AVX2)"),
                       ("x86-64-v2", "this CPU capped at x86-64-v2 (SSE4.2)")):
        table = page.split(f"## x86-64-v4 vs {level}: paddle 3.3.1")[1].split("\n## ")[0]
        row = next(r for r in table.splitlines() if r.startswith("| [abs@0]") and "`paddle.abs(x)`" in r)
        assert "| graph | bfloat16 |" in row and (
            f"0 min-norm → error: RuntimeError: paddle 3.3.1's oneDNN has no bfloat16 `abs` kernel for {cpu}: "
            "dnnl::error") in row, row
    case = pages[case_file("abs@0")]
    assert "## Instruction-set levels" in case and "x86-64-v4 vs x86-64-v2" in case and \
        "[isa-levels.md](../isa-levels.md)" in case, "the case page points to them"


def test_every_table_row_has_its_header_s_cells(index, pages):
    """A pipe left unescaped in a program or message (``|`` splits a cell even inside backticks on a code host)
    shifts every cell after it."""
    bad = []
    for name, text in {"conventions.md": index, **pages}.items():
        lines = text.splitlines()
        width = None
        for i, line in enumerate(lines):
            if not line.startswith("|"):
                width = None
                continue
            cells = len(re.findall(r"(?<!\\)\|", line))
            if width is None:
                width = cells
                assert i + 1 < len(lines) and re.fullmatch(r"\|(---\|)+", lines[i + 1]), f"{name}:{i + 1}: no header"
            elif cells != width:
                bad.append(f"{name}:{i + 1}: {cells - 1} cells, header {width - 1}")
    assert not bad, f"{len(bad)} rows off their table's header, e.g. {bad[:5]}"


def test_every_table_starts_after_a_blank_line(index, pages, sections):
    """A table right under a paragraph line is a table on GitHub but text in CommonMark renderers without the
    GFM rule (Python-Markdown): the census's "Uncovered" line ran into its table."""
    bad = []
    for name, text in {"conventions.md": index, **pages, **sections}.items():
        lines = text.splitlines()
        bad += [f"{name}:{i + 1}: {lines[i - 1][:60]!r}" for i in range(1, len(lines))
                if lines[i].startswith("|") and lines[i - 1].strip() and not lines[i - 1].startswith("|")]
    assert not bad, f"{len(bad)} table(s) glued to the line above, e.g. {bad[:3]}"


def test_a_markdown_parser_sees_the_tables_and_anchors(pages):
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark").enable("table").render(pages["relu-at-0.md"])
    assert html.count("<table>") >= 4, "oracle, torch, jax and mode tables are tables"
    assert 'id="case-relu-at-0--torch-torch-clamp-x-min-0--torch-2-13-0-cpu"' in html, "inline anchors kept"


def test_an_error_message_is_shown_as_text(shards_report):
    """``<lambda>`` would be taken for an HTML tag and a ``|`` would split the cell."""
    obs = list(shards_report.observations)
    i = next(i for i, o in enumerate(obs) if o.status == "error" and o.case == "relu@0")
    obs[i] = msgspec.structs.replace(obs[i], error="TypeError: <lambda> got x | y & z")
    page = render_case_pages(msgspec.structs.replace(shards_report, observations=obs))["relu-at-0.md"]
    assert "TypeError: &lt;lambda&gt; got x \\| y &amp; z" in page, "the message, escaped for Markdown"


def test_different_values_never_print_alike_in_the_across_table(index):
    """selu'(0) from the left, 1.7580993408473766, beside a value one ulp away printed "1.7581" twice in one
    row; fmt_distinct adds digits (9, 12, 17) until different values print differently."""
    from kinkcheck.render.view import fmt_distinct

    left = 1.0507009873554805 * 1.6732632423543772
    assert fmt_distinct([[left], [left + 2.220446049250313e-16]]) == ["1.7580993408473766", "1.7580993408473768"]
    assert fmt_distinct([[0.5, 0.5], [1, 0]]) == ["0.5, 0.5", "1, 0"], "6 digits where they suffice"
    assert fmt_distinct([[1.0000001], [1.0000002]]) == ["1.0000001", "1.0000002"]
    assert fmt_distinct([[-0.0], [0.0]]) == ["-0", "0"]
    across = index.split("### Across frameworks", 1)[1].split("\n## ", 1)[0]
    for row in (r for r in across.splitlines() if r.startswith("| [")):
        shown = [part.split(" <sub>")[0].strip("* ") for cell in row.split(" | ")[2:]
                 for part in cell.split("<br>") if "<sub>" in part]
        labels = [part.split("<sub>")[1].split(" ×")[0].split("</sub>")[0] for cell in row.split(" | ")[2:]
                  for part in cell.split("<br>") if "<sub>" in part]
        same_text = {}
        for text, label in zip(shown, labels):
            same_text.setdefault(text, set()).add(label)
        assert all(len(v) == 1 for v in same_text.values()), f"one printed value, two labels: {row[:300]}"


def test_cells_not_measured_on_a_device_say_so_and_why(not_measured_report):
    """Issue 30: cells a CUDA shard does not hold (withdrawn as the probe's error, or modes its run did not reach)
    are named on the devices page and on the case page, with the reason (the shards of stop 29, made again)."""
    page = render_section_pages(not_measured_report, json_sha256=SHA)["devices.md"]
    assert "the probe's error, not the framework's; re-measure on a CUDA device" in page, "the withdrawn cells"
    assert "the cells of forward, jacfwd, jacrev, vmap, second-order mode that the shard lacks" in page and \
        "time ran out" in page
    withdrawn = render_case_pages(not_measured_report, json_sha256=SHA)[case_file("scatter_reduce-amax@[1,1,0]")]
    assert "Not measured, and why" in withdrawn and "2.11.0 cuda: not measured" in withdrawn and \
        "the probe's error, not the framework's" in withdrawn, "a withdrawn cell says so on its case page, and why"


def test_the_census_page_shows_the_kink_hit_census_or_says_it_is_not_measured(shards_report):
    page = render_section_pages(shards_report)["census.md"]
    assert shards_report.kink_hits, "references/kinkhits/ holds the committed measurement"
    k = shards_report.kink_hits[0]
    c = next(c for c in k.cells if c.dtype == "float16" and c.depth == 1)
    assert f"| float16 | 1 | {c.differ} / {c.inits} ({100 * c.differ / c.inits:.1f} %) | 87.1 % |" in page, page[-3000:]
    assert "![Initialisations whose first-layer gradient differs" in page and "(kinkhits.svg)" in page
    assert "more chances of a pre-activation exactly 0 there" in page, "why a proportion is below the paper's"
    bare = render_section_pages(msgspec.structs.replace(shards_report, kink_hits=[]))["census.md"]
    assert "Not measured: no `references/kinkhits/*.json`" in bare and "kinkhits.svg" not in bare


def test_the_device_comparison_is_one_row_per_program_and_is_linked_from_the_index(index, sections, pages):
    """Issue 30: from the index to `devices.md`; per framework and release measured on CPU and CUDA, one row per
    program whose value differs (its modes and dtypes), what the CUDA shards do not hold and why; the case pages
    give the CUDA values beside the CPU ones."""
    assert "[`devices.md`](devices.md)" in index and "torch 2.11.0 CPU vs CUDA" in index, "the index links it"
    page = sections["devices.md"]
    tables = page.split("\n## ")[1:]
    heads = [t.splitlines()[0] for t in tables]
    assert any(h.startswith("CPU vs CUDA: torch 2.11.0") for h in heads) and any(
        h.startswith("CPU vs CUDA: jax 0.11.2") for h in heads), heads
    for table in tables:
        rows = [r for r in table.splitlines() if r.startswith("| [")]
        keys = [tuple(r.split(" | ")[:2]) for r in rows]
        assert rows and len(keys) == len(set(keys)), f"one row per (case, program): {table.splitlines()[0]}"
    torch_table = next(t for t in tables if t.startswith("CPU vs CUDA: torch 2.11.0"))
    topk = next(r for r in torch_table.splitlines() if "`torch.topk(v, 1).values`" in r and "max@[1,0,1,0,1,0]" in r)
    assert "reverse, functional, forward" in topk and "[0, 0, 1, 0, 0, 0] one-index → [1, 0, 0, 0, 0, 0] first" \
        in topk, topk
    assert "relu@0]" not in torch_table, "relu and clamp give the same values on both devices"
    assert "Expected all tensors" not in page.split("\n## ")[0] or "the probe's error, not the framework's" in page
    for op in ("scatter_reduce", "embedding_bag", "cosine_embedding_loss", "multi_margin_loss"):
        assert not [r for r in torch_table.splitlines() if op in r and any(
            s in r for s in ("same device", "two different devices", "fake tensor call"))], \
            f"{op}: the probe's error shown as a difference"
    bf16 = [r for r in torch_table.splitlines() if "embedding_bag" in r]
    assert bf16 and all("embedding_bag_backward_cud" in r for r in bf16), \
        f"embedding_bag differs only by PyTorch's own bfloat16 refusal on CUDA: {bf16}"
    assert "not measured" not in page.lower(), "every CUDA cell measured on the H200 now (stop 30)"
    assert not re.search(r"\d – \d[\d.]* cuda", index + "".join(sections.values())), \
        "a range of releases never spans the CPU and CUDA"
    for case in ("relu@0", "max@[1,0,1,0,1,0]", "median@[1,0,1,0,1,0]", "kthvalue@[1,0,1,0]"):
        text = pages[case_file(case)]
        assert "2.11.0 cuda" in text and "--torch-2-11-0-cuda" in text, f"{case}: no CUDA value on its page"


def test_no_case_page_says_one_kind_and_then_another(shards_report, pages):
    """Issue 32, item 2: a case page's first sentence says what the oracle finds (oracle_finding: the kind and its
    local Lipschitz continuity together), and no later sentence of the page contradicts it: no jump note under
    another kind, no "not locally Lipschitz" under a Lipschitz finding, no half-made phrase ("the some side")."""
    import re

    from kinkcheck.render.view import ORACLE_KINDS, case_file, oracle_finding

    seen = set()
    for case in shards_report.cases:
        page = pages[case_file(case.id)]
        o = case.oracle
        first = re.search(r"^the oracle finds (.*)$", page, re.M)
        assert first and first.group(1).startswith(oracle_finding(o.kind, o.lipschitz, markdown=True)), \
            f"{case.id}: {first and first.group(1)!r}"
        oracle_part = page.split("## Oracle", 1)[1].split("\n## ", 1)[0]
        head = page.split("## Oracle", 1)[0]  # the second-order oracle, below, has a kind of its own
        nouns = {noun for kind, (noun, _) in ORACLE_KINDS.items() if f"**{noun}**" in head}
        assert nouns == {ORACLE_KINDS[o.kind][0]}, f"{case.id}: one kind on the page, found {sorted(nouns)}"
        if o.kind != "jump":
            assert "\njump:" not in oracle_part, f"{case.id}: a jump note under {o.kind}"
        if o.lipschitz is True:
            assert "not locally Lipschitz" not in oracle_part, f"{case.id}: Lipschitz, and then not"
        if o.lipschitz is False:
            assert "not locally Lipschitz" in first.group(1), f"{case.id}: not Lipschitz, said in the first sentence"
        assert "the some side" not in page, f"{case.id}: a half-made phrase"
        seen.add(o.kind)
    assert {"differentiable", "kink", "jump"} <= seen, f"the catalog's kinds all checked: {sorted(seen)}"


def test_no_committed_page_prints_a_number_past_17_significant_digits():
    """Issue 44: a person reads decimals (the shortest float64 repr), never a 60-digit rational or selu's
    32-digit constants; a long identifier in a quoted framework error is elided (the Parquet keeps it)."""
    root = Path(__file__).resolve().parents[2] / "reports"
    number = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")
    for page in sorted([*root.glob("*.md"), *(root / "cases").glob("*.md")]):
        text = page.read_text(encoding="utf-8")
        for m in number.finditer(text):
            digits = m.group().replace(".", "").lstrip("0")
            assert len(digits) <= 17, f"{page.name}: {m.group()!r} at {text[max(0, m.start() - 60):m.end() + 20]!r}"


def test_each_frameworks_page_parts_are_kept_and_only_a_changed_frameworks_are_rendered_again(monkeypatch, tmp_path):
    """A case page's framework tables, modes tables and the index's newest-release cells are rendered per framework
    (markdown.framework_parts) and kept under its shards' judged keys: a second render reads them all (the same
    pages), one more release of one framework renders that framework's parts alone, and an entry that does not read
    back is rendered again."""
    import shutil

    from conftest import ROOT

    from kinkcheck.dev.bench import add_new_shard
    from kinkcheck.catalog import load_catalog
    from kinkcheck.render import markdown
    from kinkcheck.judge.build import build
    from kinkcheck.render.view import ReportView
    from kinkcheck.shards import load_shards

    shards = tmp_path / "shards"
    shards.mkdir()
    for name in ("tinygrad-0.13.0-cpu.json", "tinygrad-0.14.0-cpu.json", "mindspore-2.9.0-cpu.json"):
        shutil.copy(ROOT / "references" / "observations" / name, shards)
    catalog = load_catalog()
    kept: dict[str, dict] = {}
    monkeypatch.setattr(markdown, "_kept_parts", lambda key, cases: kept.get(key))
    monkeypatch.setattr(markdown, "_keep_parts", kept.__setitem__)
    made: list[str] = []
    real = ReportView.framework_tables
    monkeypatch.setattr(ReportView, "framework_tables",
                        lambda self, case, fw: made.append(fw) or real(self, case, fw))

    def render() -> tuple[dict[str, str], str, list[str]]:
        made.clear()
        report = build(load_shards(shards, catalog, lazy=True)[0], catalog)
        out = render_case_pages(report, json_sha256=SHA), render_markdown(report, json_sha256=SHA)
        return *out, sorted(set(made))

    pages, index, first = render()
    assert first == ["mindspore", "tinygrad"] and len(kept) == 2, f"each framework's parts rendered once: {first}"
    assert len(made) == 2 * len(catalog), "one table per case and framework, shared by the page and the index"
    again, index_again, second = render()
    assert second == [] and again == pages and index_again == index, \
        f"a second render reads every framework's parts, the same pages: {second}"
    framework = add_new_shard(shards).name.split("-")[0]  # the largest shard again, as one more release
    grown, _, third = render()
    assert third == [framework], f"one more {framework} release: its parts alone rendered again: {third}"
    assert grown != pages and any("+new" in text for text in grown.values()), "the new release is on the pages"
    for key in kept:
        kept[key] = None  # what _kept_parts answers for an entry that does not read back
    _, _, fourth = render()
    assert fourth == ["mindspore", "tinygrad"], f"entries that do not read back are rendered again: {fourth}"


def test_a_damaged_or_foreign_parts_entry_is_not_read(monkeypatch, tmp_path):
    import hashlib
    import json

    from kinkcheck.cache import read_cached, write_cached
    from kinkcheck.render import markdown

    monkeypatch.setenv("KINKCHECK_CACHE_DIR", str(tmp_path))
    parts = {"a@0": ["\n## torch\n", None, "torch 2.15.0: 🟦"], "b@0": [None, None, None]}
    markdown._keep_parts("k", parts)
    assert markdown._kept_parts("k", ["a@0", "b@0"]) == parts, "an entry reads back as kept"
    assert markdown._kept_parts("k", ["a@0"]) is None, "not one part per case of this report: rendered again"
    write_cached("case-parts", "other", read_cached("case-parts", "k"))
    assert markdown._kept_parts("other", ["a@0", "b@0"]) is None, "another key's entry copied here is not read"
    head, _, body = read_cached("case-parts", "k").partition(b"\n")
    write_cached("case-parts", "k", head + b"\n" + body.replace(b"2.15.0", b"2.15.1"))
    assert markdown._kept_parts("k", ["a@0", "b@0"]) is None, "an entry edited after it was written is not read"

    def signed(body: bytes) -> bytes:
        return hashlib.sha256(b"k\n" + body).hexdigest().encode() + b"\n" + body

    for body in (b"not json", b"[1]", json.dumps({"a@0": [1, 2, 3], "b@0": [None, None, None]}).encode(),
                 json.dumps({"a@0": ["x"], "b@0": [None, None, None]}).encode()):
        write_cached("case-parts", "k", signed(body))
        assert markdown._kept_parts("k", ["a@0", "b@0"]) is None, f"{body!r}: no parts, rendered again"


def test_the_page_parts_key_covers_every_module_a_page_is_rendered_with():
    """A kept page part is keyed on the code that renders it (markdown._parts_code): every kinkcheck module the
    renderer imports is among the files it hashes, so an edit to any of them (platforms/isa.py's levels, a template, a
    number format) renders the parts again instead of showing a kept one."""
    import subprocess
    import sys

    from kinkcheck.render import markdown

    listed = subprocess.run([sys.executable, "-c", "import sys, kinkcheck.render.markdown, kinkcheck.render.view\n"
                             "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.startswith('kinkcheck') "
                             "and getattr(m, '__file__', None)))"], capture_output=True, text=True, check=True)
    imported = {Path(line).resolve() for line in listed.stdout.split()}
    hashed = {p.resolve() for p in markdown._parts_sources()}
    assert imported and imported <= hashed, f"modules the renderer imports but the key leaves out: {imported - hashed}"
    templates = {p.name for p in markdown._parts_sources() if p.suffix == ".j2"}
    assert {"case-table.md.j2", "case-modes.md.j2", "case-newest.md.j2", "case.md.j2"} <= templates, templates
