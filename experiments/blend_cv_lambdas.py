"""The lambdas that ``ltr blend --weights cv`` chose in a best-recipe study's folder.

For each data set and ``--weights cv`` blend of ``experiments/best_recipe_study.py --out OUT``, reads
every cell's ``blend.json`` (``OUT/runs/DATASET/foldF/NAME-seedS/blend.json``) and prints how often
each lambda of :data:`ltr.models.blend.CV_LAMBDAS` was chosen (1 = the searched weights, 0 = equal
weights) and the mean over cells of the cross-validated value ``CV(lambda)`` of each lambda.

    python experiments/blend_cv_lambdas.py runs/br-cv-mq
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from ltr.models.blend import CV_LAMBDAS


def tally(out: Path) -> dict:
    """(data set, blend name) -> {"chosen": [count per lambda], "values": [[CV(lambda) per lambda] per cell]}."""
    found: dict = defaultdict(lambda: {"chosen": [0] * len(CV_LAMBDAS), "values": []})
    for path in sorted(out.glob("runs/*/fold*/*-seed*/blend.json")):
        cv = json.loads(path.read_text()).get("search", {}).get("cv")
        if cv is None:
            continue
        key = (path.parts[-4], path.parent.name.rsplit("-seed", 1)[0])
        found[key]["chosen"][CV_LAMBDAS.index(cv["lambda"])] += 1
        found[key]["values"].append(cv["values"])
    return dict(found)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path, help="the --out folder of experiments/best_recipe_study.py")
    args = p.parse_args(argv)
    lams = " / ".join(f"{lam:g}" for lam in CV_LAMBDAS)
    print(f"| data set | blend | cells | cells choosing lambda = {lams} | mean CV(lambda) over cells, lambda = {lams} |")
    print("|---|---|---|---|---|")
    for (dataset, name), t in sorted(tally(args.out).items()):
        means = np.mean(np.array(t["values"]), axis=0)
        print(f"| {dataset} | {name} | {len(t['values'])} | {' / '.join(map(str, t['chosen']))} "
              f"| {' / '.join(f'{v:.4f}' for v in means)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
