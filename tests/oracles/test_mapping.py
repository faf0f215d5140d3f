"""kinkcheck.oracles.mapping: framework programs mapped to sympy, cross-checked three ways.

1. Every catalog program maps, and its form equals its case's hand-written ``sympy`` field at the kink and at
   20 deterministic points next to it (exact arithmetic, then 50 digits), and the oracle judges both alike.
2. The table against the frameworks themselves: each elementwise entry's derivative (sympy) against the
   framework's gradient (float64, away from kinks), so a wrong default or convention in the table fails here.
3. Unit tests per family of entries, the Unmapped message, ``wrt`` constants and the public cases Q1-Q8:
   tests/oracles/test_mapping_families.py.
"""

from __future__ import annotations

import importlib
import math
import re
from functools import cache

import pytest
import sympy
from sympy import Rational

from kinkcheck.language import expr as ex
from kinkcheck.oracles import mapping as mp
from kinkcheck.oracles import values
from kinkcheck.oracles import symbolic as sym
from kinkcheck.oracles.mapping import TABLE, SympyForm, Unmapped, sympy_form
from mapped import CASES, CATALOG, close, hand, near_points, value



#: Functions the table does not map, by family, with why: a catalog program calling one is skipped here
#: (its case is judged against the case's own ``sympy`` field); a new unmapped function fails
#: test_every_catalog_program_maps until it is mapped or listed, and a listed function the table maps fails
#: test_the_unmapped_list_is_current.
UNMAPPED: dict[str, str] = {
    **dict.fromkeys(['torch.linalg.eigh', 'torch.linalg.eigvalsh', 'torch.linalg.eig', 'torch.linalg.eigvals', 'torch.linalg.svd', 'torch.linalg.svdvals', 'torch.svd', 'torch.Tensor.svd', 'torch.nuclear_norm', 'torch.linalg.cond', 'torch.linalg.det', 'torch.linalg.lstsq', 'torch.linalg.pinv', 'torch.pinverse', 'torch.linalg.qr', 'torch.linalg.lu', 'torch.linalg.lu_factor', 'torch.linalg.lu_factor_ex', 'torch.lu', 'jax.numpy.linalg.eigh', 'jax.numpy.linalg.eigvalsh', 'jax.numpy.linalg.eig', 'jax.numpy.linalg.eigvals', 'jax.numpy.linalg.svd', 'jax.numpy.linalg.svdvals', 'jax.numpy.linalg.cond', 'jax.numpy.linalg.det', 'jax.numpy.linalg.lstsq', 'jax.numpy.linalg.pinv', 'jax.numpy.linalg.qr', 'jax.numpy.poly', 'jax.numpy.polyfit', 'jax.numpy.corrcoef', 'torch.corrcoef'], "eigen-, singular-value and other matrix decompositions: their values are roots of polynomials the table does not build (the case's sympy field writes them by hand)"),
    **dict.fromkeys(['torch.Tensor.scatter_reduce', 'torch.Tensor.index_reduce', 'torch.segment_reduce', 'jax.lax.ScatterDimensionNumbers', 'jax.numpy.take', 'torch.nn.functional.embedding_bag'], 'scatter, segment and index reductions: index arrays and dimension numbers the table does not model'),
    **dict.fromkeys(['jax.lax.cond', 'jax.lax.switch', 'jax.numpy.piecewise', 'jax.lax.associative_scan', 'jax.lax.reduce', 'jax.numpy.logaddexp.accumulate'], "control flow and scans take Python callables, which a program's sympy form cannot hold"),
    **dict.fromkeys(['torch.mode', 'torch.Tensor.mode', 'jax.numpy.partition', 'jax.numpy.percentile', 'jax.numpy.nanpercentile', 'jax.lax.approx_max_k', 'jax.lax.approx_min_k', 'jax.lax.sort_key_val', 'torch.aminmax', 'torch.Tensor.aminmax', 'jax.numpy.sort_complex'], "order statistics with a computed position (mode, partition, percentiles, approximate top-k, key-value sorts, min and max as one call) are not in the table's order-statistic handlers"),
    **dict.fromkeys(['torch.nn.functional.max_pool1d_with_indices', 'torch.nn.functional.max_pool2d_with_indices', 'torch.nn.functional.max_pool3d_with_indices', 'torch.nn.functional.adaptive_max_pool1d_with_indices', 'torch.nn.functional.adaptive_max_pool2d_with_indices', 'torch.nn.functional.adaptive_max_pool3d_with_indices', 'torch.nn.functional.lp_pool1d', 'torch.nn.functional.lp_pool2d', 'torch.nn.functional.lp_pool3d', 'torch.Tensor.unfold', 'torch.nn.functional.grid_sample', 'torch.grid_sampler_2d', 'torch.grid_sampler_3d', 'jax.numpy.interp', 'jax.numpy.histogram', 'jax.numpy.histogram2d', 'jax.numpy.histogramdd', 'jax.numpy.histogram_bin_edges', 'torch.histogram', 'torch.histogramdd', 'jax.numpy.unwrap'], 'pooling with indices, power-average pooling, unfolded windows and grid sampling: index outputs and interpolation weights the table does not model'),
    **dict.fromkeys(['torch.nn.functional.multi_margin_loss', 'torch.nn.functional.multilabel_margin_loss', 'torch.nn.functional.triplet_margin_loss', 'torch.nn.functional.triplet_margin_with_distance_loss', 'torch.nn.functional.gaussian_nll_loss', 'torch.nn.functional.cosine_similarity', 'torch.cosine_similarity', 'torch.nn.functional.normalize', 'torch.nn.functional.pdist', 'torch.pdist', 'torch.renorm', 'torch.Tensor.renorm', 'torch.norm_except_dim', 'torch.frobenius_norm', 'torch.hinge_embedding_loss', 'torch.kl_div'], "losses over rows and classes (margins, triplets, pairwise distances, normalisation by a clamped norm): reductions the table's elementwise loss rows do not cover"),
    **dict.fromkeys(['torch.nextafter', 'torch.Tensor.nextafter', 'jax.numpy.nextafter', 'torch.frexp', 'jax.numpy.frexp', 'torch.fake_quantize_per_tensor_affine', 'jax.lax.stop_gradient'], "floating-point bit operations (one ulp, mantissa and exponent, fake quantisation, stop_gradient): no exact symbolic value, or a derivative that is not the value's"),
    **dict.fromkeys(['jax.numpy.signbit', 'torch.signbit'], "the sign bit tells -0.0 from 0.0, which sympy's numbers "
                    "do not: a form would read signbit(-0.0) as False"),
    **dict.fromkeys(['torch.Tensor.index_put', 'torch.index_put', 'torch.Tensor.scatter', 'torch.Tensor.put',
                     'torch.Tensor.index_copy', 'jax.Array.at[].set'], "a plain write at a duplicate index "
                    "(set@duplicate-index): which write wins is undefined, so the program is no one function (the "
                    "case's field is a stand-in whose Clarke set holds every order's derivative)"),
    **dict.fromkeys(['torch.ones', 'jax.numpy.arange', 'jax.numpy.int32'], "constructors and dtype casts a program "
                    "builds constants and indices with (a loss's target, an index or knot grid, a branch index): "
                    "the table maps functions of the differentiated inputs"),
}

#: Cases at the edge of a function's real domain whose hand-written field extends the function past it (as the
#: framework does) where the mapped form is undefined: the fields and forms are compared beside the point only
#: where both are real, and the oracle is not compared.
EDGE_OF_DOMAIN = {
    "binary_cross_entropy@0-target1": "log(x) is not real for x < 0: the field is torch's clamp at -100 there "
                                      "(a constant), the mapped Max(-100, log(x)) is undefined, so its oracle "
                                      "sees a jump",
    "binary_cross_entropy@0-target0": "as binary_cross_entropy@0-target1, for log(1 - x) at x = 0",
}

#: (case, program) pairs whose form differs from the hand-written field in value at the kink point itself,
#: with why. Their derivatives agree (both constant on each side), so the oracle check still applies.
VALUE_AT_KINK_DIFFERS = {
    ("round@0.5", "torch.round(x)"): "torch.round rounds half to even (0.5 -> 0); the field floor(x + 0.5) gives 1",
    ("round@0.5", "jax.numpy.round(x)"): "jax.numpy.round rounds half to even (0.5 -> 0); the field gives 1",
    ("fake_quantize_per_tensor_affine@0.5", "torch.clamp(torch.round(x), 0, 2)"): "half to even (0.5 -> 0); the "
        "field floor(x + 0.5) gives 1",
    ("fake_quantize_per_tensor_affine@0.5", "jax.numpy.clip(jax.numpy.round(x), 0, 2)"): "half to even; the field "
        "gives 1",
}




@cache
def mapped(case_id: str) -> dict[str, tuple[SympyForm, list[str]]]:
    """Distinct mapped forms of a case's programs: text → (form, program ids)."""
    case = CATALOG.case(case_id)
    out: dict[str, tuple[SympyForm, list[str]]] = {}
    for p in case.programs:
        if p.framework not in TABLE_FRAMEWORKS:
            continue  # test_other_frameworks_mapped_programs_compute_the_case_function
        try:
            f = sympy_form(p.tree, case.at, p.framework)
        except Unmapped as err:
            if err.name in UNMAPPED:
                continue
            raise
        out.setdefault(f.text, (f, []))[1].append(f"{p.framework}: {p.id}")
    return out


# --------------------------------------------------------------------------- 1. the catalog


#: Frameworks whose whole catalog the table maps.
TABLE_FRAMEWORKS = ("torch", "jax")


def test_every_catalog_program_maps() -> None:
    failed, total, unmapped = [], 0, 0
    for case in CASES:
        for p in case.programs:
            if p.framework not in TABLE_FRAMEWORKS:
                continue
            total += 1
            try:
                sympy_form(p.tree, case.at, p.framework)
            except Unmapped as err:
                if err.name not in UNMAPPED:
                    failed.append(f"{case.id} {p.framework}: {p.id}: {err}")
                else:
                    unmapped += 1
    assert total >= 700, f"the catalog has {total} torch and JAX programs; it had 734 when the staged cases came"
    assert not failed, f"{len(failed)} of {total} catalog programs do not map:\n" + "\n".join(failed)
    assert unmapped / total <= 0.25, f"{unmapped} of {total} torch and JAX programs do not map (more than a quarter)"


def _unmapped_name(case, p) -> str | None:
    try:
        sympy_form(p.tree, case.at, p.framework)
    except Unmapped as err:
        return err.name
    return None


def test_the_unmapped_list_is_current() -> None:
    """Every listed function is still unmapped and still called by a catalog program (else the list is stale)."""
    called = {n for c in CASES for p in c.programs if p.framework in TABLE_FRAMEWORKS
              for n in [_unmapped_name(c, p)] if n is not None}
    stale = sorted(set(UNMAPPED) - called)
    assert not stale, f"listed as unmapped but no catalog program fails on them (mapped now?): {stale}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_mapped_form_equals_the_hand_written_field(case) -> None:
    f, syms, point = hand(case.id)
    points = [point, *near_points(point, 20, case.id)]
    for text, (m, programs) in mapped(case.id).items():
        assert m.components == tuple(s.name for s in syms), f"{case.id}: {programs} name components {m.components}"
        assert m.point == point, f"{case.id}: {programs} point {m.point}, case point {point}"
        for q in points:
            if q == point and all((case.id, p.split(": ", 1)[1]) in VALUE_AT_KINK_DIFFERS for p in programs):
                continue
            got, want = value(m.expr, m.symbols, q, q == point), value(f, syms, q, q == point)
            if case.id in EDGE_OF_DOMAIN and got == "undefined":
                continue  # outside the real domain the field extends (EDGE_OF_DOMAIN)
            assert close(got, want), (
                f"{case.id}: {programs} map to {text}, which is {got} at {q}; the case's field {case.sympy} is {want}"
            )


def _judgement(r) -> tuple:
    return (r.kind, set(r.limiting_gradients), r.clarke and set(r.clarke), r.min_norm, r.left, r.right,
            getattr(r, "lipschitz", None))


@cache
def _analyzed(case_id: str, text: str):
    m = mapped(case_id)[text][0]
    return sym.analyze_expression(m.expr, m.symbols, m.point, case_id=case_id, tie=CATALOG.case(case_id).tie)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_oracle_judges_the_mapped_form_as_the_case(case) -> None:
    f, syms, point = hand(case.id)
    for text, (m, programs) in mapped(case.id).items():
        if (m.expr, m.symbols, m.point) == (f, syms, point):
            continue  # the very expression of the field: the same judgement by construction
        if case.id in EDGE_OF_DOMAIN:
            continue  # the mapped form is undefined on one side (EDGE_OF_DOMAIN)
        want = sym.analyze(case)
        got = _analyzed(case.id, text)
        assert _judgement(got) == _judgement(want), (
            f"{case.id}: the oracle on {text} (from {programs}) gives kind {got.kind}, Clarke {got.clarke}, "
            f"min-norm {got.min_norm}; on the field {case.sympy}: {want.kind}, {want.clarke}, {want.min_norm}"
        )


def test_other_frameworks_mapped_programs_compute_the_case_function() -> None:
    """The table maps some functions of the other frameworks (TensorFlow's elementwise kinks, the NumPy clones
    autograd.numpy and tf.experimental.numpy): each catalog program of theirs that maps computes the case's
    function beside the kink (to float64's precision: their programs write constants as float literals,
    ``1.0507009873554805`` for selu's scale)."""
    checked = 0
    for case in CASES:
        f, syms, point = hand(case.id)
        for p in case.programs:
            if p.framework in TABLE_FRAMEWORKS:
                continue
            try:
                m = sympy_form(p.tree, case.at, p.framework)
            except Unmapped:
                continue
            for q in near_points(point, 8, case.id):
                got, want = value(m.expr, m.symbols, q, q == point), value(f, syms, q, q == point)
                if case.id in EDGE_OF_DOMAIN and got == "undefined":
                    continue
                assert isinstance(got, str) == isinstance(want, str) and (
                    got == want if isinstance(got, str) else abs(complex(got) - complex(want)) <= 1e-14 * max(
                        1.0, abs(complex(want)))), f"{case.id} {p.framework}: {p.id} is {got} at {q}, the case {want}"
            checked += 1
    assert checked >= 50, f"only {checked} programs of other frameworks map"


# --------------------------------------------------------------------------- 2. the table against the frameworks

_GRID = (Rational(-23, 10), Rational(-3, 5), Rational(17, 10))  # away from every kink in the table


def _resolve(name: str) -> object | None:
    """The framework object a table name stands for, or None when the installed framework lacks it."""
    parts = name.split(".")
    root = importlib.import_module(parts[0])
    obj = {"Tensor": getattr(root, "Tensor", None), "Array": getattr(root, "Array", None)}.get(parts[1], root)
    rest = parts[2:] if parts[1] in ("Tensor", "Array") else parts[1:]
    for i, seg in enumerate(rest):
        nxt = getattr(obj, seg, None)
        if nxt is None:  # a submodule its parent does not import (jax.scipy.special)
            try:
                nxt = importlib.import_module(".".join(parts[: len(parts) - len(rest) + i + 1]))
            except ImportError:
                return None
        obj = nxt
    return obj


def _missing_names(framework: str) -> list[str]:
    """Table names that the installed framework does not have."""
    return [name for name in TABLE if name.split(".")[0] == framework and _resolve(name) is None]


def _elementwise_terms(framework: str) -> list[tuple[str, str, dict]]:
    """(table name, program text, point) per elementwise entry callable with its defaults: once per framework
    function (an alias with the same entry is the same function), inputs named apart (``a3``, ``b3``) so that
    many terms can share one gradient call, on the grid (vectors: the gradient of the sum of an elementwise
    function is its derivative at each element)."""
    out, seen = [], set()
    for i, (name, entry) in enumerate(sorted(TABLE.items())):
        if entry.kind != "elementwise" or not name.startswith(framework) or name in CALLED_OTHERWISE:
            continue
        required = [p for p in entry.parameters.parameters.values() if p.default is p.empty]
        same = (id(_resolve(name)), repr(entry))
        if len(required) not in (1, 2) or same in seen:
            continue
        seen.add(same)
        args = [f"a{i}", f"b{i}"][: len(required)]
        if name.startswith(("torch.Tensor.", "jax.Array.")):
            text = f"{args[0]}.{name.rsplit('.', 1)[1]}({', '.join(args[1:])})"
        else:
            text = f"{name}({', '.join(args)})"
        grid = [float(v) for v in _GRID]
        out.append((name, text, dict(zip(args, [grid, grid[1:] + grid[:1]]))))
    return out


def _slope(f: SympyForm, i: int) -> sympy.Expr | str:
    """d f / d symbol i at the point, by a central difference with step 1e-25 at 50 digits: independent of
    sympy.diff (which recurses without end on floor/Mod forms), exact to ~1e-25 away from kinks."""
    h = Rational(1, 10**25)
    up = tuple(p + h if j == i else p for j, p in enumerate(f.point))
    down = tuple(p - h if j == i else p for j, p in enumerate(f.point))
    a, b = value(f.expr, f.symbols, up), value(f.expr, f.symbols, down)
    if isinstance(a, str) or isinstance(b, str) or not (a.is_real and b.is_real):
        return "undefined"
    return (a - b) / (2 * h)


def _table_against(adapter, framework: str) -> list[str]:
    """Every term's sympy derivative against the framework's gradient, the terms summed into programs of at
    most :data:`kinkcheck.language.expr.MAX_LENGTH` characters (one compilation each in JAX, not one per function)."""
    def summed(term: str) -> str:
        return f"{term}.sum()" if framework == "torch" else f"jax.numpy.sum({term})"

    wrong, chunks = [], [[]]
    for t in _elementwise_terms(framework):
        if len(" + ".join(summed(c[1]) for c in [*chunks[-1], t])) > ex.MAX_LENGTH:
            chunks.append([])
        chunks[-1].append(t)
    for chunk in chunks:
        at = {k: v for _, _, a in chunk for k, v in a.items()}
        text = " + ".join(summed(t) for _, t, _ in chunk)
        mode = "jit" if framework == "jax" else "reverse"  # one XLA compilation per chunk, not one per operation
        got = adapter.gradient(ex.parse(text, at, {framework}), at, "float64", device="cpu", mode=mode)
        for name, term, term_at in chunk:
            f = sympy_form(ex.parse(term, term_at, {framework}), term_at, framework)
            have = [g for k in term_at for g in got[k]]
            for j, (c, h) in enumerate(zip(f.components, have)):
                want = _slope(f, j)
                if isinstance(want, str):
                    continue  # outside the real domain here (sqrt of a negative number)
                # rel 1e-6: torch's hardsigmoid backward multiplies by 1/6 rounded to float32 (0.1666666716…)
                if not (isinstance(h, float) and math.isfinite(h)) or not math.isclose(
                        h, float(want), rel_tol=1e-6, abs_tol=1e-12):
                    wrong.append(f"{name}: d/d{c} of {term} at {term_at}: {framework} {h}, table form {f.text} "
                                 f"gives {float(want)}")
    return wrong


#: Entries whose one- or two-argument call is not valid in the framework, with why (tested elsewhere).
CALLED_OTHERWISE = {
    "torch.clamp": "needs min or max (test_clamp_binds_every_spelling)",
    "torch.clip": "needs min or max",
    "torch.Tensor.clamp": "needs min or max",
    "torch.Tensor.clip": "needs min or max",
    "torch.zeros_like": "constant: no gradient to compare", "torch.ones_like": "constant: no gradient to compare",
    "torch.full_like": "fill_value must be a Python number", "jax.numpy.zeros_like": "constant",
    "jax.numpy.ones_like": "constant", "jax.numpy.full_like": "constant",
    "torch.heaviside": "torch has no derivative for heaviside", "torch.Tensor.heaviside": "no derivative",
    "torch.prelu": "the weight has one element or one per channel (the catalog's prelu@0 and prelu-weight@0)",
    "torch.nn.functional.prelu": "the weight has one element or one per channel",
    "torch.Tensor.prelu": "the weight has one element or one per channel",
    "torch.floor_divide": "torch has no derivative for floor_divide (an error cell of floor_divide@(2,1))",
    "torch.Tensor.floor_divide": "no derivative",
}


@pytest.mark.torch
def test_torch_entries_match_torch_gradients(torch_adapter) -> None:
    assert not _missing_names("torch"), f"the table names what torch lacks: {_missing_names('torch')}"
    wrong = _table_against(torch_adapter, "torch")
    assert not wrong, f"{len(wrong)} torch gradients disagree with the table:\n" + "\n".join(wrong[:20])


@pytest.mark.jax
def test_jax_entries_match_jax_gradients(jax_adapter) -> None:
    assert not _missing_names("jax"), f"the table names what jax lacks: {_missing_names('jax')}"
    wrong = _table_against(jax_adapter, "jax")
    assert not wrong, f"{len(wrong)} jax gradients disagree with the table:\n" + "\n".join(wrong[:20])


#: Programs of the non-elementwise entries (reductions, order statistics, norms, distances, losses, pooling,
#: shapes), weighted so that every component's derivative differs, at a generic point (no ties, no kinks).
_GENERIC = {"v": [0.31, -1.27, 2.05, 0.83], "w": [1.12, 0.44, -0.58, 1.9], "m": [[0.7, -1.3], [2.1, 0.4]]}
HANDLER_PROGRAMS = {
    "torch": [
        "(torch.sort(v).values * W4).sum()", "(torch.sort(v, descending=True).values * W4).sum()",
        "(torch.topk(v, 2).values * W2).sum()", "(torch.topk(v, 2, largest=False).values * W2).sum()",
        "torch.kthvalue(v, 2).values", "torch.median(v)", "torch.quantile(v, 0.3)", "torch.msort(v)[1]",
        "torch.logsumexp(v, 0)", "(torch.softmax(v, 0) * W4).sum()", "(F.log_softmax(v, dim=0) * W4).sum()",
        "torch.linalg.vector_norm(v, 3)", "torch.linalg.vector_norm(v, 0.5)", "torch.linalg.vector_norm(v, torch.inf)",
        "torch.linalg.vector_norm(v, -torch.inf)", "torch.norm(m)", "torch.norm(m, 'nuc')",
        "torch.linalg.matrix_norm(m, 'nuc')", "torch.linalg.matrix_norm(m, 2)", "torch.linalg.matrix_norm(m, -2)",
        "torch.linalg.matrix_norm(m, 1)", "torch.linalg.matrix_norm(m, -torch.inf)", "torch.linalg.norm(m, 'fro')",
        "torch.linalg.norm(v)", "(torch.cdist(v.reshape(2, 2), w.reshape(2, 2), p=1.5) * m).sum()",
        "F.pairwise_distance(v, w)", "torch.dist(v, w, 3)", "F.smooth_l1_loss(v, w, beta=0.5)",
        "F.huber_loss(v, w, delta=0.5)", "F.mse_loss(v, w)", "F.l1_loss(v, w, reduction='sum')",
        "(F.max_pool1d(v.reshape(1, 1, 4), 2) * W2).sum()", "(F.adaptive_max_pool1d(v.reshape(1, 1, 4), 3) * W3).sum()",
        "(torch.amax(m, dim=1) * W2).sum()", "(torch.min(m, dim=0).values * W2).sum()", "torch.prod(v)",
        "(torch.mean(m, dim=0, keepdim=True) * m).sum()", "(torch.cat([v, w]) * torch.cat([W4, W4 * 2])).sum()",
        "(torch.stack([v, w], dim=1) * m[0][0]).sum()", "(v.reshape(2, 2) @ w.reshape(2, 2) * m).sum()",
        "torch.dot(v, w)", "v[w.argmax()] * 3 + v[w.argmin()]", "torch.where(v > w, v, w * 2).sum()",
        "(torch.flatten(m) * W4).sum()", "(m.t() * m).sum()", "(torch.squeeze(v.reshape(1, 4)) * W4).sum()",
        "(torch.unsqueeze(v, 0) * w.reshape(4, 1)).sum()", "(torch.max(v, w) * W4).sum()",
    ],
    "jax": [
        "(jnp.sort(v) * W4).sum()", "(jnp.sort(v, descending=True) * W4).sum()", "jnp.median(v)",
        "jnp.quantile(v, 0.3)", "(jax.lax.top_k(v, 2)[0] * W2).sum()", "jax.scipy.special.logsumexp(v)",
        "(jax.nn.softmax(v) * W4).sum()", "(jax.nn.log_softmax(v) * W4).sum()", "jnp.linalg.norm(v, 3)",
        "jnp.linalg.norm(v, -jnp.inf)", "jnp.linalg.norm(m, 'nuc')", "jnp.linalg.norm(m, 2)", "jnp.linalg.norm(m, -1)",
        "jnp.linalg.norm(m, jnp.inf)", "jnp.linalg.norm(m)", "jnp.linalg.norm(m, axis=1)[0]",
        "(jnp.max(m, axis=1) * W2).sum()", "jnp.prod(v)", "(jnp.mean(m, axis=0, keepdims=True) * m).sum()",
        "(jax.lax.reduce_window(m, -jnp.inf, jax.lax.max, (2, 1), (1, 1), 'VALID') * W2).sum()",
        "(jnp.concatenate([v, w]) * jnp.concatenate([W4, W4 * 2])).sum()", "(jnp.stack([v, w], axis=1) * 3).sum()",
        "(v.reshape(2, 2) @ w.reshape(2, 2) * m).sum()", "jnp.dot(v, w)", "v[w.argmax()] * 3 + v[jnp.argmin(w)]",
        "jnp.where(v > w, v, w * 2).sum()", "(jnp.ravel(m) * W4).sum()", "(jnp.transpose(m) * m).sum()",
        "jnp.linalg.vector_norm(v, ord=1)", "jnp.linalg.matrix_norm(m, ord='nuc')",
    ],
}
_WEIGHTS = {"W4": "[1.0, 2.0, 3.0, 4.0]", "W3": "[1.0, 2.0, 3.0]", "W2": "[1.0, 2.0]"}


def _handlers_against(adapter, framework: str) -> list[str]:
    """Each program's mapped derivative against the framework's gradient; programs get their own inputs
    (``v3``, ``w3``, ``m3``) and are summed into chunks of at most MAX_LENGTH characters, one call each."""
    weight = "torch.tensor({})" if framework == "torch" else "jax.numpy.array({})"
    programs = []
    for i, template in enumerate(HANDLER_PROGRAMS[framework]):
        text = re.sub(r"\b(W[234])\b", lambda mo: weight.format(_WEIGHTS[mo.group(1)]), template)
        text = re.sub(r"\b([vwm])\b", lambda mo, i=i: f"{mo.group(1)}{i}", text)
        at = {f"{k}{i}": v for k, v in _GENERIC.items() if re.search(rf"\b{k}{i}\b", text)}
        programs.append((template, text, at))
    chunks = [[]]
    for prog in programs:
        if len(" + ".join(f"({p[1]})" for p in [*chunks[-1], prog])) > ex.MAX_LENGTH:
            chunks.append([])
        chunks[-1].append(prog)
    wrong = []
    mode = "jit" if framework == "jax" else "reverse"  # one XLA compilation per chunk
    for chunk in chunks:
        at = {k: v for _, _, a in chunk for k, v in a.items()}
        got = adapter.gradient(ex.parse(" + ".join(f"({p[1]})" for p in chunk), at, {framework}), at, "float64",
                               device="cpu", mode=mode)
        for template, text, prog_at in chunk:
            f = sympy_form(ex.parse(text, prog_at, {framework}), prog_at, framework)
            have = [g for k in prog_at for g in _flatten(got[k])]
            for j, (c, h) in enumerate(zip(f.components, have)):
                want = _slope(f, j)
                assert not isinstance(want, str), f"{template}: {c} is outside the real domain at the generic point"
                if not math.isclose(h, float(want), rel_tol=1e-7, abs_tol=1e-12):
                    wrong.append(f"d/d{c} of {template}: {framework} {h}, mapped form {f.text} gives {float(want)}")
    return wrong


def _flatten(v):
    return [e for i in v for e in _flatten(i)] if isinstance(v, list) else [v]


@pytest.mark.torch
def test_torch_reductions_norms_and_shapes_match_torch_gradients(torch_adapter) -> None:
    wrong = _handlers_against(torch_adapter, "torch")
    assert not wrong, f"{len(wrong)} torch gradients disagree with the mapping:\n" + "\n".join(wrong[:20])


@pytest.mark.jax
def test_jax_reductions_norms_and_shapes_match_jax_gradients(jax_adapter) -> None:
    wrong = _handlers_against(jax_adapter, "jax")
    assert not wrong, f"{len(wrong)} jax gradients disagree with the mapping:\n" + "\n".join(wrong[:20])


def test_every_entry_binds_and_its_forms_compile() -> None:
    for name, entry in TABLE.items():
        sig = entry.parameters  # parses
        assert sig.parameters, f"{name}: empty signature"
        if entry.kind == "elementwise":
            forms = [entry.form] if isinstance(entry.form, str) else [v for k, v in entry.form.items() if k != "param"]
            if isinstance(entry.form, dict):
                assert entry.form["param"] in sig.parameters, f"{name}: chooses by an unknown parameter"
            for f in forms:
                values._compile(f, tuple(sig.parameters))  # raises on a name outside the form namespace
        elif entry.kind == "reduce":
            assert entry.form in mp._REDUCERS, f"{name}: unknown reduction {entry.form}"
        else:
            assert entry.kind in mp._HANDLERS, f"{name}: unknown handler {entry.kind}"
    assert len(mp.mapped_names()) == len(TABLE) >= 400, f"the table maps {len(TABLE)} names"
