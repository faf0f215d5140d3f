"""New release lines (kinkcheck.dev.releases, `nox -s releases`): read from an index JSON shaped like PyPI's, offline."""

from __future__ import annotations

import pytest

from kinkcheck.dev.releases import (installable, lines, main, new_lines, platforms_of, read_platforms, write_matrix,
                                write_platforms)


def _project(*releases):
    """An index JSON: each release a (version, [(filename, requires_python, yanked), ...])."""
    return {"releases": {v: [{"filename": f, "requires_python": rp, "yanked": y} for f, rp, y in files]
                         for v, files in releases}}


def test_installable_reads_the_wheel_tags():
    assert installable("torch-2.16.0-cp311-cp311-manylinux_2_28_x86_64.whl")
    assert installable("jax-0.10.2-py3-none-any.whl")
    assert installable("mlx-0.30.0-cp39-abi3-manylinux_2_35_x86_64.whl"), "abi3 from an older CPython"
    assert not installable("torch-2.16.0-cp312-cp312-manylinux_2_28_x86_64.whl"), "another CPython"
    assert not installable("torch-2.16.0-cp311-cp311-manylinux_2_28_aarch64.whl"), "another architecture"
    assert not installable("mlx-0.30.0-cp311-cp311-macosx_14_0_arm64.whl"), "another OS"
    assert not installable("torch-2.16.0.tar.gz"), "not a wheel"
    assert not installable("x-1.0-cp311-cp311-musllinux_1_1_x86_64.whl"), "musl, not glibc"
    assert not installable("x-1.0-cp311-cp311-manylinux_2_39_x86_64.whl"), "a glibc newer than the runners' 2.35"
    assert installable("x-1.0-cp311-cp311-manylinux2014_x86_64.whl") and installable("x-1.0-py310-none-any.whl")
    assert not installable("x-1.0-cp312-abi3-manylinux2014_x86_64.whl"), "abi3 from a newer CPython"


def test_new_lines_are_the_newest_patch_of_each_newer_line():
    wheel = "x-{}-cp311-cp311-manylinux_2_28_x86_64.whl"
    project = _project(
        ("2.14.1", [(wheel.format("2.14.1"), ">=3.10", False)]),
        ("2.15.0", [(wheel.format("2.15.0"), ">=3.10", False)]),
        ("2.15.1", [(wheel.format("2.15.1"), ">=3.10", False)]),
        ("2.16.0", [(wheel.format("2.16.0"), ">=3.10", False)]),
        ("2.16.1", [(wheel.format("2.16.1"), ">=3.10", False)]),
        ("2.17.0rc1", [(wheel.format("2.17.0rc1"), ">=3.10", False)]),
        ("2.17.0", [(wheel.format("2.17.0"), ">=3.10", True)]),
        ("2.18.0", [("x-2.18.0-py3-none-any.whl", ">=3.12", False)]),
    )
    assert lines(project)[(2, 16)] == lines(project)[(2, 16)].__class__("2.16.1")
    added, patch, later = new_lines(["2.14.1", "2.15.0"], project)
    assert added == ["2.16.1"], "the newest patch of 2.16; 2.17.0 yanked, 2.17.0rc1 a pre-release"
    assert patch == "2.15.1", "a newer patch of the newest line is reported"
    assert later == {"2.18.0": "3.12"}, "a line only for a newer Python is named, not added"
    assert new_lines(["2.16.1"], project)[:2] == ([], None)


def test_write_matrix_appends_to_the_frameworks_line(tmp_path):
    path = tmp_path / "matrix.toml"
    path.write_text('# comment\ntorch = ["2.14.1", "2.15.0"]\njax = ["0.10.2"]\n')
    write_matrix({"torch": ["2.16.1"], "jax": []}, path)
    assert path.read_text() == '# comment\ntorch = ["2.14.1", "2.15.0", "2.16.1"]\njax = ["0.10.2"]\n'
    with pytest.raises(ValueError, match="no array 'mlx = \\[...\\]'"):
        write_matrix({"mlx": ["0.33.0"]}, path)


def test_main_says_what_is_new_and_one_line_when_the_index_cannot_be_read(capsys):
    from kinkcheck.registry import MATRIX

    newest = MATRIX["tinygrad"][-1]
    major, minor = (int(p) for p in newest.split(".")[:2])
    nxt = f"{major}.{minor + 1}.0"
    project = _project((nxt, [(f"tinygrad-{nxt}-py3-none-any.whl", ">=3.10", False)]))
    assert main(["--framework", "tinygrad"], get=lambda dist: project) == 0
    out = capsys.readouterr().out
    assert f"tinygrad    matrix newest {newest}" in out and f"new release lines {nxt}" in out, out

    def offline(dist):
        raise OSError("network unreachable")

    assert main(["--framework", "autograd"], get=offline) == 2
    err = capsys.readouterr().err.strip()
    assert err == "autograd: cannot read the index for autograd: network unreachable", err


def test_the_registry_reads_the_matrix_file():
    import tomllib
    from pathlib import Path

    import kinkcheck
    from kinkcheck.registry import MATRIX, REGISTRY

    data = tomllib.loads((Path(kinkcheck.__file__).parent / "matrix.toml").read_text())
    assert {fw: tuple(v) for fw, v in data.items()} == dict(MATRIX) == {f.name: f.versions for f in REGISTRY.values()}
    assert all(f.tested in f.versions for f in REGISTRY.values() if f.tested), "each tested release is in the matrix"


def test_a_release_needs_its_companions_and_a_malformed_index_is_one_line(capsys):
    """jax pins jaxlib to its own version: a jax line without an installable jaxlib is not new; a malformed index
    JSON or a matrix file without the framework's array is one line, exit 2."""
    jax = _project(("0.10.2", [("jax-0.10.2-py3-none-any.whl", ">=3.11", False)]),
                   ("0.11.0", [("jax-0.11.0-py3-none-any.whl", ">=3.11", False)]))
    jaxlib = _project(("0.10.2", [("jaxlib-0.10.2-cp311-cp311-manylinux_2_27_x86_64.whl", ">=3.11", False)]),
                      ("0.11.0", [("jaxlib-0.11.0-cp312-cp312-manylinux_2_27_x86_64.whl", ">=3.12", False)]))
    assert new_lines(["0.10.2"], jax)[0] == ["0.11.0"], "jax alone looks installable"
    added, _, later = new_lines(["0.10.2"], jax, [jaxlib])
    assert added == [] and later == {"0.11.0": "3.12"}, \
        "jaxlib 0.11.0 has no cp311 wheel (jax alone claims 3.11): not new for 3.11, new for 3.12"
    for bad in ({"releases": {"1.0": ["x.whl"]}}, {"releases": None}, {"info": {}}):
        with pytest.raises(ValueError):
            lines(bad)
    assert main(["--framework", "autograd"], get=lambda d: {"releases": {"9.0": "nope"}}) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autograd: cannot read the index for autograd: ") and len(err.splitlines()) == 1, err


def test_write_matrix_reads_a_multi_line_array(tmp_path):
    path = tmp_path / "matrix.toml"
    path.write_text("torch = [\n  '2.14.1',\n  '2.15.0',\n]\njax = ['0.10.2']\n")
    write_matrix({"torch": ["2.16.1"]}, path)
    assert path.read_text() == 'torch = ["2.14.1", "2.15.0", "2.16.1"]\njax = [\'0.10.2\']\n'


def test_installable_on_each_platform():
    assert installable("torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl", platform="linux_aarch64")
    assert not installable("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", platform="linux_aarch64")
    assert installable("mlx-0.32.4-cp311-cp311-macosx_14_0_arm64.whl", platform="macos_arm64")
    assert installable("torch-2.13.0-cp311-none-macosx_11_0_arm64.whl", platform="macos_arm64")
    assert not installable("mlx-0.32.4-cp311-cp311-macosx_15_0_arm64.whl", platform="macos_arm64"), \
        "a macOS newer than the runners' 14"
    assert not installable("x-1.0-cp311-cp311-macosx_10_9_x86_64.whl", platform="macos_arm64"), "Intel only"
    assert installable("x-1.0-cp311-cp311-macosx_10_9_universal2.whl", platform="macos_arm64")
    assert installable("jaxlib-0.4.30-cp311-cp311-win_amd64.whl", platform="windows_amd64")
    assert installable("autograd-1.8.0-py3-none-any.whl", platform="windows_amd64")
    with pytest.raises(ValueError, match="unknown platform 'linux_riscv64'"):
        installable("x-1.0-py3-none-any.whl", platform="linux_riscv64")


def test_platforms_of_needs_every_companion_and_takes_a_pure_source_release():
    jax = _project(("0.4.13", [("jax-0.4.13.tar.gz", ">=3.8", False)]),
                   ("0.4.30", [("jax-0.4.30-py3-none-any.whl", ">=3.9", False)]))
    jaxlib = _project(("0.4.13", [("jaxlib-0.4.13-cp311-cp311-macosx_11_0_arm64.whl", ">=3.8", False),
                                  ("jaxlib-0.4.13-cp311-cp311-win_amd64.whl", ">=3.8", False)]),
                      ("0.4.30", [("jaxlib-0.4.30-cp311-cp311-manylinux2014_aarch64.whl", ">=3.9", False),
                                  ("jaxlib-0.4.30-cp311-cp311-win_amd64.whl", ">=3.9", True)]))
    assert platforms_of("0.4.13", [jax, jaxlib]) == ["macos_arm64", "windows_amd64"], \
        "jax 0.4.13 is a source distribution only: it goes wherever jaxlib has a wheel"
    assert platforms_of("0.4.30", [jax, jaxlib]) == ["linux_aarch64"], "a yanked wheel does not count"
    assert platforms_of("0.4.30", [jax, jaxlib], (3, 12)) == [], "no cp312 jaxlib"
    assert platforms_of("0.5.0", [jax, jaxlib]) == [], "a release the index does not have"
    yanked = _project(("1.0", [("x-1.0-cp311-cp311-manylinux_2_28_x86_64.whl", ">=3.9", True)]))
    assert platforms_of("1.0", [yanked]) == [], "a release whose only wheel is yanked installs nowhere"
    future = _project(("1.0", [("x-1.0.tar.gz", ">=3.99", False)]))
    assert platforms_of("1.0", [future]) == [], "a source distribution for another Python installs nowhere"
    with pytest.raises(ValueError, match="no 'releases' table"):
        platforms_of("0.4.30", [{"info": {}}])


def test_a_companion_with_a_marker_is_needed_only_where_the_marker_holds():
    """mlx-cpu is named for Windows only (``; platform_system == "Windows"``): it has no macOS wheel, and macOS
    still gets the release; on Windows it is needed like any companion."""
    from kinkcheck.registry import REGISTRY
    from kinkcheck.dev.releases import marker_environment, pinned_requirements

    reqs = pinned_requirements(REGISTRY["mlx"].requirements("0.32.4"), "0.32.4")
    assert [r.name for r in reqs] == ["mlx", "mlx-cpu"] and reqs[0].marker is None
    assert [t for t in ("linux_x86_64", "macos_arm64", "windows_amd64")
            if reqs[1].marker.evaluate(marker_environment(t))] == ["windows_amd64"]
    mlx = _project(("0.32.4", [("mlx-0.32.4-cp311-cp311-macosx_14_0_arm64.whl", ">=3.10", False),
                               ("mlx-0.32.4-cp311-cp311-win_amd64.whl", ">=3.10", False)]))
    cpu = _project(("0.32.4", [("mlx_cpu-0.32.4-py3-none-manylinux_2_35_x86_64.whl", ">=3.10", False)]))
    markers = [r.marker for r in reqs]
    assert platforms_of("0.32.4", [mlx, cpu], markers=markers) == ["macos_arm64"], \
        "no mlx-cpu wheel for Windows: not there; macOS does not need it"
    assert platforms_of("0.32.4", [mlx, cpu]) == [], "without the markers every companion is needed everywhere"
    assert REGISTRY["mlx"].requirements("0.31.2") == ["mlx[cpu]==0.31.2"], "no Windows wheel before 0.32"


def test_platforms_file_round_trips_and_a_bad_one_is_one_line(tmp_path):
    path = tmp_path / "platforms.toml"
    table = {"linux_aarch64": {"torch": ["2.13.0"], "jax": []}, "macos_arm64": {"mlx": ["0.2.0", "0.32.4"]}}
    write_platforms(table, path)
    assert read_platforms(path) == {"linux_aarch64": {"torch": ("2.13.0",), "jax": ()},
                                    "macos_arm64": {"mlx": ("0.2.0", "0.32.4")}}
    first = path.read_bytes()
    write_platforms(table, path)
    assert path.read_bytes() == first, "the same table, the same bytes"
    assert read_platforms(tmp_path / "absent.toml") == {}
    path.write_text('[macos_arm64]\nmlx = "0.32.4"\n')
    with pytest.raises(ValueError, match=r"\[macos_arm64\] is not a table of framework = \[releases\]"):
        read_platforms(path)
    path.write_text("[macos_arm64\n")
    with pytest.raises(ValueError, match="platforms.toml: "):
        read_platforms(path)
    for text, why in (('[macos_arm46]\nmlx = ["0.32.4"]\n', r"unknown platform \[macos_arm46\]"),
                      ('[linux_x86_64]\nmlx = ["0.32.4"]\n', r"unknown platform \[linux_x86_64\]"),
                      ('[macos_arm64]\ntoch = ["2.13.0"]\n', "names 'toch', not a framework of the matrix"),
                      ('[macos_arm64]\nmlx = ["9.9.9"]\n', "mlx: 9.9.9 not in the matrix")):
        path.write_text(text)
        with pytest.raises(ValueError, match=why):
            read_platforms(path)


def test_the_committed_platforms_table_lists_releases_of_the_matrix():
    from kinkcheck.platforms import DEFAULT, PLATFORMS
    from kinkcheck.registry import MATRIX

    table = read_platforms()
    assert set(table) == set(PLATFORMS) - {DEFAULT}, "every other platform of the runners"
    for tag, frameworks in table.items():
        for fw, versions in frameworks.items():
            assert list(versions) == [v for v in MATRIX[fw] if v in versions], f"{tag} {fw}: releases of the matrix"
    assert "0.32.4" in table["macos_arm64"]["mlx"] and "tensorflow" not in table["macos_arm64"], \
        "MLX on Apple silicon; tensorflow-cpu has no macOS wheel"
