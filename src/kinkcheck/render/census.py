"""The kink-hit census measurement as Markdown (``kinkcheck census``'s output and the report's census page).

Rendering only: it reads a ``kinkcheck/kinkhits/v1`` record (:func:`kinkcheck.answers.hitcensus.run`), the paper's
figures included, and imports nothing of kinkcheck.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["PAPER_PREACTIVATIONS", "PRECISION", "render_run"]

#: A dtype's precision as the paper names it (float16 and bfloat16 are both its 16 bit).
PRECISION: dict[str, str] = {"float64": "64 bit", "float32": "32 bit", "float16": "16 bit", "bfloat16": "16 bit"}

#: Pre-activations per hidden layer that one initialisation of the paper's depth sweep looks at: 235 minibatches
#: of 256 MNIST images (60,000 / 256, the last one partial) × 256 neurons.
PAPER_PREACTIVATIONS = 60_000 * 256


def render_run(record: dict[str, Any]) -> str:
    """The reference census as Markdown: measurement 1 beside the paper, 2 and 3."""
    sc = record["scale"]
    env = record["environment"]
    proportions = record["paper"]["proportions"]  # the paper's figures as the record holds them
    out = [f"Kink hits in training: {env.get('framework', 'torch')} {env['framework_version']} on the CPU, "
           f"{sc['inits']} initialisations of width {sc['width']}, batch {sc['batch']}, {record['data']}; "
           f"{record['seconds']} s.", "",
           "| dtype | depth | initialisations whose first-layer gradient differs (ReLU'(0) = 0 vs 1) | "
           "paper (MNIST, width 256, 1,000 initialisations) | minibatches with a hit | hits per hidden layer |",
           "|---|---|---|---|---|---|"]
    for c in record["cells"]:
        paper = proportions[PRECISION[c["dtype"]]].get(str(c["depth"]))
        ptxt = "not run" if paper is None and str(c["depth"]) in proportions[PRECISION[c["dtype"]]] else (
            "—" if paper is None else f"{paper:g} %")
        frac = 100 * c["differ"] / c["inits"] if c["inits"] else 0.0
        out.append(f"| {c['dtype']} | {c['depth']} | {c['differ']} / {c['inits']} ({frac:.1f} %) | {ptxt} | "
                   f"{c['minibatches_with_hits']} / {c['minibatches']} | {', '.join(map(str, c['hits']))} |")
    names = list(record["cells"][0]["convention_differs"]) if record["cells"] else []
    out += ["", "Minibatches where the first-layer gradient differs from ReLU'(0) = 0:", "",
            "| dtype | depth | " + " | ".join(f"`{k}`" for k in names) + " |",
            "|---|---|" + "---|" * len(names)]
    for c in record["cells"]:
        out.append(f"| {c['dtype']} | {c['depth']} | "
                   + " | ".join(str(c["convention_differs"].get(k, "")) for k in names) + " |")
    if record["training"]:
        out += ["", "Training (SGD, learning rate 0.1, batch 64, 1,500 digits; test on the other 297):", "",
                "| dtype | ReLU'(0) | epochs | final loss | test accuracy | kink hits met |", "|---|---|---|---|---|---|"]
        for t in record["training"]:
            out.append(f"| {t['dtype']} | {t['convention'].split('=')[1]} | {t['epochs']} | {t['final_loss']:.4f} | "
                       f"{100 * t['test_accuracy']:.1f} % | {t['kink_hits']} |")
    out += ["", _exposure(record), "", f"Paper: {record['paper']['source']}."]
    return "\n".join(out) + "\n"


def _exposure(record: dict[str, Any]) -> str:
    """Why a proportion here can be far below the paper's at the same precision: the pre-activations one
    initialisation looks at per layer, here and there, and what the paper's depth-1 rate at 32 and 16 bits
    predicts at this scale (a hit being independent and equally likely at each pre-activation)."""
    sc = record["scale"]
    here = (1797 // sc["batch"]) * sc["batch"] * sc["width"] * sc["passes"]
    parts = [f"Per initialisation and hidden layer this scale looks at {here:,} pre-activations (minibatches × batch "
             f"× width), the paper's at {PAPER_PREACTIVATIONS:,}: {PAPER_PREACTIVATIONS / here:.0f}× more chances "
             "of a pre-activation exactly 0 there."]
    for precision in ("32 bit", "16 bit"):
        p = record["paper"]["proportions"][precision].get("1")
        if p is None or p >= 100:
            continue
        rate = -math.log(1 - p / 100) / PAPER_PREACTIVATIONS
        expect = 100 * (1 - math.exp(-rate * here))
        parts.append(f"The paper's depth-1 figure at {precision} ({p:g} %) is a rate of one hit in {1 / rate:.2g} "
                     f"pre-activations; at that rate {expect:.2g} % of initialisations would differ at depth 1 here.")
    return " ".join(parts)
