#!/usr/bin/env python3
"""Fit node.sync_jitter_s (planner/cost.h ts_sync_wait_s) to the published weak scaling of
NVIDIA's H100 FP8 recipes.

Under Transformer Engine's delayed scaling every chunk's forward and backward end in a blocking
amax all-reduce over TP x DP x CP, so a step of an FP8 run waits for the slowest replica about
2 * micro-batches * chunks times, where its BF16 twin synchronises the replicas once. With more
data parallelism the expected wait grows (E[max of n normals]); the published FP8 steps of the
dgxc series grow more with data parallelism than their BF16 twins do (`planner_accuracy
--scaling`). This script measures that FP8-only growth and fits the one parameter to it.

For every row of a series (the same model, tp, pp and cp; dgxc-benchmarking rows of
validation/published/published-cases.json), against the series' smallest run:
  y = (published FP8 growth - predicted FP8 growth) - (the same for the BF16 twin), relative,
  x = d(predicted FP8 growth - predicted BF16 growth) / d(sigma),
with the predictions at sigma = 0 (x from a second run at sigma = PROBE_S; the step is linear in
sigma). Each series gives its own sigma = sum(x y) / sum(x x) (least squares through the
origin); the fit is the median of the series' own, so that one series' noise (a published step
out of line with its neighbours) does not carry it. It also prints the least squares over all
rows and with each series left out, to show how far one series moves that. The rows are predicted by build/bench/planner_accuracy on a copy of the data tree
whose H100 system files carry the sigma being tried.

  python3 scripts/fit_sync_jitter.py [--bench build/bench/planner_accuracy]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROBE_S = 1e-4
SYSTEMS = ("h100-sxm-dgx",)  # the dgxc rows' system
ROW = re.compile(r"^\s+(nvidia-dgxc-(\S+)-(bf16|fp8)-(\d+)gpu)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+"
                 r"([\d.]+)\s+([\d.]+)\s+\S+\s+(?:\S+\s+)?(dp=\S+)")


def predictions(bench, root, sigma):
    """{row id: (series, dtype, gpus, tp, pp, cp, published, predicted)} at `sigma`."""
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("models", "validation"):
            shutil.copytree(os.path.join(root, d), os.path.join(tmp, d))
        for name in SYSTEMS:
            path = os.path.join(tmp, "models", "systems", name + ".json")
            with open(path) as f:
                spec = json.load(f)
            spec["node"]["sync_jitter_s"] = {"value": sigma, "source": "fit_sync_jitter.py probe"}
            with open(path, "w") as f:
                json.dump(spec, f)
        env = dict(os.environ, TESSERA_DATA=tmp)
        out = subprocess.run([bench], env=env, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        cp = int(re.search(r"cp=(\d+)", m.group(11)).group(1))
        rows[m.group(1)] = (m.group(2), m.group(3), int(m.group(5)), int(m.group(6)), int(m.group(7)), cp,
                            float(m.group(9)), float(m.group(10)))
    if not rows:
        sys.exit("fit_sync_jitter: no dgxc rows in %s's output" % bench)
    return rows


def points(at0, at1):
    """(series, gpus, x, y) for every FP8 row with a BF16 twin, against its series' smallest run
    at the same tp, pp and cp."""
    out = []
    fp8 = [k for k, v in at0.items() if v[1] == "fp8"]
    for k in fp8:
        s, _, gpus, tp, pp, cp, _, _ = at0[k]
        base = min((j for j in fp8 if at0[j][0] == s and at0[j][3:6] == (tp, pp, cp)), key=lambda j: at0[j][2])
        if base == k:
            continue
        twin, twin_base = k.replace("-fp8-", "-bf16-"), base.replace("-fp8-", "-bf16-")
        if twin not in at0 or twin_base not in at0:
            continue

        def growth(table, a, b, col):
            return table[b][col] / table[a][col] - 1

        y = (growth(at0, base, k, 6) - growth(at0, base, k, 7)) - (growth(at0, twin_base, twin, 6) -
                                                                   growth(at0, twin_base, twin, 7))
        x = ((growth(at1, base, k, 7) - growth(at0, base, k, 7)) -
             (growth(at1, twin_base, twin, 7) - growth(at0, twin_base, twin, 7))) / PROBE_S
        out.append((s, gpus, x, y))
    return out


def informative(pts):
    """A series says something about sigma when 100 us of it would move its rows' growth by 0.1%
    (root mean square): pp = 1 series with few micro-batches reduce too seldom."""
    return len(pts) > 0 and (sum(p[2] ** 2 for p in pts) / len(pts)) ** 0.5 * 1e-4 >= 1e-3


def fit(pts):
    sxx = sum(p[2] * p[2] for p in pts)
    return sum(p[2] * p[3] for p in pts) / sxx if sxx > 0 else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--bench", default=os.path.join(root, "build", "bench", "planner_accuracy"),
                    help="the planner_accuracy binary (default: the repository's build)")
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        sys.exit("fit_sync_jitter: %s: not built (make build/bench/planner_accuracy)" % args.bench)
    at0, at1 = predictions(args.bench, root, 0.0), predictions(args.bench, root, PROBE_S)
    pts = points(at0, at1)
    series = sorted({p[0] for p in pts})
    print("# FP8-only weak-scaling growth against the planner's, per series (x: growth per second of sigma)")
    print("# %-16s %5s %9s %9s %12s" % ("series", "rows", "sum x^2", "sum x y", "own sigma"))
    for s in series:
        mine = [p for p in pts if p[0] == s]
        print("  %-16s %5d %9.0f %9.3f %9.0f us%s" % (s, len(mine), sum(p[2] ** 2 for p in mine),
                                                     sum(p[2] * p[3] for p in mine), 1e6 * fit(mine),
                                                     "" if informative(mine) else "  (uninformative)"))
    own = sorted(fit([p for p in pts if p[0] == s]) for s in series if informative([p for p in pts if p[0] == s]))
    mid = len(own) // 2
    median = own[mid] if len(own) % 2 else 0.5 * (own[mid - 1] + own[mid])
    print("# sigma, the median of the %d informative series' own: %.0f us" % (len(own), 1e6 * median))
    print("# (least squares over all %d rows: %.0f us; without one series:%s)" % (
        len(pts), 1e6 * fit(pts), ",".join(" %s %.0f" % (s, 1e6 * fit([p for p in pts if p[0] != s])) for s in series)))


if __name__ == "__main__":
    main()
