"""Shards + oracles → the report document (the ``kinkcheck/conventions/v1`` JSON contract).

Every observation cell comes from a shard; labels come from :func:`kinkcheck.classify.classify` against
the sympy oracle; network cross-checks from :mod:`kinkcheck.oracles.backprop`. Nothing is typed in. The
document is deterministic for the same shards: only ``generated_at`` (in the provenance block) changes.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from kinkcheck import __version__
from kinkcheck.catalog import FRAMEWORKS, Case, Catalog
from kinkcheck.classify import OracleNumbers, classify, same_value
from kinkcheck.diff import Side, changed_in, compare
from kinkcheck.frameworks.base import flat_value
from kinkcheck.oracles import backprop
from kinkcheck.oracles.table import oracle_table

__all__ = ["SCHEMA_ID", "build", "P0_PROGRAMS"]

SCHEMA_ID = "kinkcheck/conventions/v1"

#: Programs shown in the P0 worked example, in order (case relu@0).
P0_PROGRAMS: tuple[tuple[str, str], ...] = (
    ("torch", "torch.nn.functional.relu(x)"),
    ("torch", "x.clamp(min=0)"),
    ("torch", "torch.clamp(x, min=0)"),
    ("jax", "jax.nn.relu(x)"),
    ("jax", "jax.numpy.maximum(x, 0.0)"),
    ("jax", "jax.numpy.clip(x, 0)"),
)
#: relu'(0) values the NumPy oracle is shown with in the worked example.
P0_KINK_DERIVATIVES: tuple[Fraction, ...] = (Fraction(0), Fraction(1, 2), Fraction(1))


def _env_sort_key(env: dict[str, Any]) -> tuple[Any, ...]:
    from packaging.version import InvalidVersion, Version

    try:
        v: Any = Version(env["framework_version"])
    except InvalidVersion:
        v = Version("0")
    fw = env["framework"]
    rank = FRAMEWORKS.index(fw) if fw in FRAMEWORKS else len(FRAMEWORKS)
    return (rank, fw, v, env["device"])


def _value_key(case: Case, value: dict[str, Any] | None) -> list[float] | None:
    return None if value is None else flat_value({k: value[k] for k in case.inputs})


def _group(items: Iterable[tuple[str, list[float] | None, str, str]], dtype: str) -> list[dict[str, Any]]:
    """Group (program, flat value, framework, first label) by value within tolerance, in first-seen order."""
    groups: list[dict[str, Any]] = []
    for program, flat, framework, label in items:
        if flat is None:
            continue
        for g in groups:
            if same_value(g["flat"], flat, dtype):
                g["programs"].append({"framework": framework, "program": program})
                break
        else:
            groups.append({"flat": flat, "label": label, "programs": [{"framework": framework, "program": program}]})
    return groups


def build(shards: Sequence[dict[str, Any]], catalog: Catalog, gaps: Sequence[str] = ()) -> dict[str, Any]:
    """Build the report document.

    Parameters
    ----------
    shards : sequence of dict
        Shards as read by :func:`kinkcheck.shards.load_shards` (validated).
    catalog : Catalog
    gaps : sequence of str
        One line per shard that could not be read; shown in the report.

    Returns
    -------
    dict
        The ``kinkcheck/conventions/v1`` document (see ``schemas/conventions.v1.json``).
    """
    shards = sorted(shards, key=lambda s: _env_sort_key(s["environment"]))
    environments = [s["environment"] for s in shards]
    table = oracle_table(catalog)
    oracles = {cid: OracleNumbers.from_json(d) for cid, d in table.items()}
    cases_out = []
    for c in catalog:
        entry = {
            "id": c.id, "title": c.title, "sympy": c.sympy, "at": c.at, "tie": c.tie, "sources": list(c.sources),
            "note": c.note,
            "programs": [{"framework": p.framework, "program": p.id} for p in c.programs],
            "notes": dict(c.notes), "no_equivalent": dict(c.no_equivalent),
        }
        oj = dict(table[c.id])
        oj.pop("case", None)
        oj["oracle_notes"] = oj.pop("notes", [])
        entry.update(oj)
        cases_out.append(entry)

    observations = []
    stale: list[str] = []
    unknown: dict[str, set[str]] = {}
    labels_memo: dict[tuple[Any, ...], list[str]] = {}
    scalar_derivative: dict[tuple[str, str, str, str], float] = {}
    for s in shards:
        env = s["environment"]
        if env["catalog_hash"] != catalog.hash:
            stale.append(f"{env['id']}: measured with catalog {env['catalog_hash']}, current catalog is {catalog.hash}")
        for ob in s["observations"]:
            try:
                case = catalog.case(ob["case"])
                case.program(env["framework"], ob["program"])
            except KeyError:
                unknown.setdefault(env["id"], set()).add(f"{ob['case']} / {ob['program']}")
                continue
            flat = _value_key(case, ob["value"])
            memo_key = (case.id, ob["dtype"], ob["status"], None if flat is None else tuple(flat))
            if memo_key not in labels_memo:  # many environments return the same value: classify it once
                labels_memo[memo_key] = classify(
                    flat, oracles[case.id], ob["dtype"],
                    error=ob["error"] if ob["status"] == "error" else None,
                    unavailable=ob["error"] if ob["status"] == "unavailable" else None,
                )
            labels = list(labels_memo[memo_key])
            observations.append({
                "case": case.id, "program": ob["program"], "framework": env["framework"], "environment": env["id"],
                "mode": ob["mode"], "dtype": ob["dtype"], "status": ob["status"], "value": ob["value"],
                "labels": labels, "error": ob["error"],
            })
            if flat is not None and len(flat) == 1 and ob["mode"] == "reverse":
                scalar_derivative[(env["id"], case.id, ob["program"], ob["dtype"])] = flat[0]

    networks = []
    for s in shards:
        env = s["environment"]
        for nw in s["networks"]:
            try:
                case = catalog.case(nw["case"])
            except KeyError:
                continue
            kd = scalar_derivative.get((env["id"], nw["case"], nw["program"], nw["dtype"]))
            row: dict[str, Any] = {
                "case": nw["case"], "program": nw["program"], "framework": env["framework"], "environment": env["id"],
                "dtype": nw["dtype"], "status": nw["status"], "kink_derivative": None, "ok": None,
                "max_abs_diff": None, "detail": nw["error"], "W1": nw["W1"], "W2": nw["W2"],
            }
            if nw["status"] == "ok" and kd is not None and case.activation in backprop.ACTIVATIONS:
                cc = backprop.crosscheck(nw["W1"], nw["W2"], case.activation, kd, nw["dtype"])
                row.update(kink_derivative=_num(kd), ok=bool(cc.ok), max_abs_diff=_num(cc.max_abs_diff),
                           detail=None if cc.ok else cc.detail)
            elif nw["status"] == "ok":
                row["detail"] = "no scalar observation of this program to take the kink derivative from"
            networks.append(row)

    doc = {
        "schema": SCHEMA_ID,
        "provenance": {
            "generated_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            "kinkcheck_version": __version__,
            "catalog_hash": catalog.hash,
            "gaps": list(gaps) + stale + [
                f"{eid}: {len(items)} observation(s) of cases or programs not in the catalog were ignored "
                f"(e.g. {sorted(items)[0]})" for eid, items in sorted(unknown.items())
            ],
        },
        "environments": environments,
        "cases": cases_out,
        "observations": observations,
        "networks": networks,
        "p0": _p0(networks, {e["id"]: e for e in environments}),
    }
    doc["disagreements"] = disagreements(doc, catalog)
    doc["changed_in"] = changed_in(environments, observations, _env_sort_key)
    doc["version_span"] = _version_span(doc)
    doc["coverage"] = _coverage(doc)
    doc["network_summary"] = _network_summary(doc["networks"])
    doc["summary"] = _summary(doc)
    return doc


def _network_summary(networks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per case and program: how many end-to-end network runs agree with the NumPy oracle."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for n in networks:
        row = out.setdefault((n["case"], n["framework"], n["program"]), {
            "case": n["case"], "framework": n["framework"], "program": n["program"], "runs": 0, "agree": 0,
            "differ": [], "not_checked": 0})
        row["runs"] += 1
        if n["ok"] is True:
            row["agree"] += 1
        elif n["ok"] is False:
            row["differ"].append(f"{n['environment']} {n['dtype']}: {n['detail']}")
        else:
            row["not_checked"] += 1
    return list(out.values())


def _version_span(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Per framework (CPU): how many programs changed between the oldest and newest measured release."""
    measured = {o["environment"] for o in doc["observations"]}
    out = []
    for fw in FRAMEWORKS:
        envs = sorted((e for e in doc["environments"] if e["framework"] == fw and e["device"] == "cpu"
                       and e["id"] in measured), key=_env_sort_key)
        if len(envs) < 2:
            continue
        sides = []
        for e in (envs[0], envs[-1]):
            obs = {(o["case"], o["program"], o["mode"], o["dtype"]): o for o in doc["observations"]
                   if o["environment"] == e["id"]}
            sides.append(Side(e["id"], e, obs))
        changes = compare(*sides)
        out.append({"framework": fw, "oldest": envs[0]["framework_version"], "newest": envs[-1]["framework_version"],
                    "releases": len(envs), "programs_changed": len({(c.case, c.program) for c in changes})})
    return out


def _coverage(doc: dict[str, Any]) -> dict[str, Any]:
    """What the shards measured and, derived from their absence, what they did not (with the reason)."""
    from kinkcheck.frameworks.base import DTYPES, MODES

    obs = doc["observations"]
    have = {"devices": sorted({e["device"] for e in doc["environments"]}),
            "dtypes": [d for d in DTYPES if any(o["dtype"] == d for o in obs)],
            "modes": [m for m in MODES if any(o["mode"] == m for o in obs)]}
    missing = [f"{e['id']}: {e['not_measured']}" for e in doc["environments"] if e.get("not_measured")]
    for fw in FRAMEWORKS:
        envs = [e for e in doc["environments"] if e["framework"] == fw]
        if not envs:
            missing.append(f"{fw}: not measured: no shard")
        elif not any(e["device"] == "cuda" for e in envs):
            missing.append(f"{fw} on CUDA: not measured: no shard from a CUDA device")
    absent_dtypes = [d for d in DTYPES if d not in have["dtypes"]]
    if absent_dtypes:
        missing.append(f"{', '.join(absent_dtypes)}: not measured: no shard probed these dtypes")
    absent_modes = [m for m in MODES if m not in have["modes"]]
    if absent_modes:
        missing.append(f"{', '.join(absent_modes)} mode: not measured: no shard probed it")
    return {**have, "not_measured": missing}


def _num(v: float) -> Any:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _p0(networks: Sequence[dict[str, Any]], env_by_id: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The worked example of P0: NumPy oracle rows for relu'(0) = 0, 1/2, 1 and the measured programs."""
    oracle_rows = []
    for kd in P0_KINK_DERIVATIVES:
        g = backprop.two_layer_grads(backprop.P0, "relu", kd, dtype=Fraction)
        oracle_rows.append({
            "kink_derivative": str(kd),
            "W1": [[_frac_num(v) for v in row] for row in g.dW1.tolist()],
            "W2": [[_frac_num(v) for v in row] for row in g.dW2.tolist()],
        })
    measured = []
    for fw, prog in P0_PROGRAMS:
        runs = sorted((nw for nw in networks if nw["case"] == "relu@0" and nw["framework"] == fw
                       and nw["program"] == prog and nw["dtype"] == "float32"),
                      key=lambda nw: _env_sort_key(env_by_id[nw["environment"]]))
        for nw in runs:  # consecutive releases with the same result share one row
            same = ("W1", "W2", "kink_derivative", "ok", "status")
            if measured and measured[-1]["program"] == prog and measured[-1]["framework"] == fw and \
                    all(measured[-1][k] == nw[k] for k in same):
                measured[-1]["environments"].append(nw["environment"])
                continue
            row = {k: nw[k] for k in ("framework", "program", "dtype", "status", "kink_derivative", "ok", "W1", "W2",
                                      "detail")}
            row["environments"] = [nw["environment"]]
            row["W1_minus_oracle0"] = _minus(nw["W1"], oracle_rows[0]["W1"])
            measured.append(row)
    for row in measured:
        versions = [env_by_id[e]["framework_version"] for e in row["environments"]]
        row["releases"] = versions[0] if len(versions) == 1 else f"{versions[0]} – {versions[-1]} ({len(versions)} releases)"
    net = backprop.P0
    return {
        "net": {"X": net.X.tolist(), "W1": net.W1.tolist(), "W2": net.W2.tolist(), "target": net.target.tolist(),
                "loss": "sum((relu(X @ W1) @ W2 - target) ** 2)"},
        "oracle": oracle_rows,
        "measured": measured,
    }


def _minus(a: Any, b: Any) -> Any:
    """Elementwise a - b of two nested lists (shard numbers, possibly "nan"); None when ``a`` is None."""
    if a is None:
        return None
    if isinstance(a, list):
        return [_minus(x, y) for x, y in zip(a, b)]
    return _num(float(a) - float(b))


def _frac_num(v: Any) -> Any:
    f = Fraction(v)
    return int(f) if f.denominator == 1 else float(f)


def disagreements(doc: dict[str, Any], catalog: Catalog) -> dict[str, list[dict[str, Any]]]:
    """Programs for the same case that return different values (reverse mode), within and across frameworks.

    ``within``: per environment, case and dtype, the groups of programs with equal values, when there are
    two or more groups. ``across``: per case and dtype, comparing the newest environment of each framework,
    the values some framework returns that no program of another framework returns.
    """
    by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for ob in doc["observations"]:
        if ob["mode"] != "reverse":
            continue
        by_key.setdefault((ob["environment"], ob["case"], ob["dtype"]), []).append(ob)
    within = []
    envs = doc["environments"]
    dtypes = sorted({ob["dtype"] for ob in doc["observations"]}, key=["float64", "float32", "float16", "bfloat16"].index)
    for env in envs:
        for case in catalog:
            for dtype in dtypes:
                obs = by_key.get((env["id"], case.id, dtype), [])
                groups = _group(((o["program"], _value_key(case, o["value"]), o["framework"], o["labels"][0])
                                 for o in obs), dtype)
                if len(groups) > 1:
                    within.append({"environment": env["id"], "framework": env["framework"], "case": case.id,
                                   "dtypes": [dtype], "groups": [_strip(g) for g in groups]})
    newest: dict[str, str] = {}
    for env in sorted(envs, key=_env_sort_key):
        if env["device"] == "cpu":
            newest[env["framework"]] = env["id"]
    across = []
    for case in catalog:
        for dtype in dtypes:
            obs = [o for eid in newest.values() for o in by_key.get((eid, case.id, dtype), [])]
            groups = _group(((o["program"], _value_key(case, o["value"]), o["framework"], o["labels"][0])
                             for o in obs), dtype)
            frameworks = {p["framework"] for g in groups for p in g["programs"]}
            one_sided = [g for g in groups if len({p["framework"] for p in g["programs"]}) == 1]
            if len(frameworks) > 1 and one_sided:
                stripped = []
                for g in groups:
                    fws = {p["framework"] for p in g["programs"]}
                    stripped.append({**_strip(g), "only": fws.pop() if len(fws) == 1 else None})
                across.append({"case": case.id, "dtypes": [dtype], "environments": sorted(newest.values()),
                               "groups": stripped})
    merged = _merge_dtypes(within, ("environment", "case"))
    return {"within": _merge_environments(merged, {e["id"]: e for e in envs}), "across": _merge_dtypes(across, ("case",))}


def _merge_environments(entries: list[dict[str, Any]], env_by_id: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry for all releases of a framework whose programs split the same way (case order kept)."""
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for e in entries:
        key = (e["framework"], e["case"], tuple(e["dtypes"]),
               tuple((g["label"], tuple((p["framework"], p["program"]) for p in g["programs"])) for g in e["groups"]))
        if key in out:
            out[key]["environments"].append(e["environment"])
        else:
            out[key] = {**{k: v for k, v in e.items() if k != "environment"}, "environments": [e["environment"]]}
    for e in out.values():
        versions = [env_by_id[i]["framework_version"] for i in e["environments"]]
        e["releases"] = versions[0] if len(versions) == 1 else f"{', '.join(versions)}"
    order = {c: i for i, c in enumerate(dict.fromkeys(e["case"] for e in entries))}
    return sorted(out.values(), key=lambda e: (order[e["case"]], e["framework"] != "torch", e["environments"][0]))


def _merge_dtypes(entries: list[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """One entry for several dtypes when the programs fall into the same groups with the same labels."""
    out: list[dict[str, Any]] = []
    for e in entries:
        shape = [(g["label"], g["programs"]) for g in e["groups"]]
        for prev in out:
            if all(prev[k] == e[k] for k in keys) and [(g["label"], g["programs"]) for g in prev["groups"]] == shape:
                prev["dtypes"].extend(e["dtypes"])
                break
        else:
            out.append(e)
    return out


def _strip(g: dict[str, Any]) -> dict[str, Any]:
    return {"value": [_num(v) for v in g["flat"]], "label": g["label"], "programs": g["programs"]}


def _summary(doc: dict[str, Any]) -> dict[str, Any]:
    obs = doc["observations"]
    return {
        "cases": len(doc["cases"]),
        "programs": sum(len(c["programs"]) for c in doc["cases"]),
        "environments": len(doc["environments"]),
        "observations": len(obs),
        "errors": sum(o["status"] == "error" for o in obs),
        "unavailable": sum(o["status"] == "unavailable" for o in obs),
        "outside_clarke": sum("outside-clarke" in o["labels"] for o in obs),
        "nan": sum("nan" in o["labels"] for o in obs),
        "disagreements_within": len(doc["disagreements"]["within"]),
        "disagreements_across": len(doc["disagreements"]["across"]),
        "network_mismatches": sum(n["ok"] is False for n in doc["networks"]),
        "network_runs": len(doc["networks"]),
        "changed_in": len(doc["changed_in"]),
        "not_measured": sum(1 for e in doc["environments"] if e.get("not_measured")),
    }
