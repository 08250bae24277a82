#!/usr/bin/env python3
"""The report of scripts/measure-spread.sh: for every comparison (check) the largest gap over the
kernel configurations and the one-ulp perturbation, where it was measured, the bound, and the
margin bound / gap.  Checks that differ only in a step number are folded into one line (their
largest gap, at the step named).  Exits 1 when a gap exceeds its bound."""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict

MARGIN = 1000.0


def main(paths: list[str]) -> int:
    rows: dict[str, list[dict]] = defaultdict(list)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    record = json.loads(line)
                    folded = re.sub(r"\b(step|epoch) \d+\b", r"\1 *", record["check"])
                    rows[folded].append(record)
    if not rows:
        print("spread-report: no figures (did any test call within()?)")
        return 1
    exceeded = 0
    lines = []
    for check, records in rows.items():
        worst = max(records, key=lambda r: r["gap"] / r["bound"] if r["bound"] else r["gap"])
        exact = max((r["gap"] for r in records if not r["ulp"]), default=float("nan"))
        ulp = max((r["gap"] for r in records if r["ulp"]), default=float("nan"))
        bound = worst["bound"]
        margin = bound / worst["gap"] if worst["gap"] > 0 else float("inf")
        configs = len({r["config"] for r in records})
        flag = "EXCEEDED" if worst["gap"] > bound else ("margin<1000" if margin < MARGIN else "")
        exceeded += worst["gap"] > bound
        where = f"{worst['config']}{' +ulp' if worst['ulp'] else ''}"
        step = re.search(r"\b(step|epoch) \d+\b", worst["check"])
        lines.append((margin, f"{check}\n    gap {exact:.2e} (kernels) {ulp:.2e} (+1 ulp), worst "
                      f"{worst['gap']:.2e} on {where}{' at ' + step.group(0) if step else ''}; "
                      f"bound {bound:.1e}{' relative' if worst['relative'] else ''}; margin "
                      f"{margin:.3g} over {configs} configurations {flag}"))
    for _, text in sorted(lines, key=lambda t: t[0]):
        print(text)
    print(f"spread-report: {len(rows)} checks, {exceeded} exceeded")
    return 1 if exceeded else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
