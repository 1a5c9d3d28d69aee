"""`qscaling bench fit`: time the scaling-law fitter, and measure its bootstrap-CI coverage over many seeds.

Timing: Chinchilla (5 parameters) on 200 synthetic points drawn from Besiroglu et al.'s constants, a 4^5
start grid and 1000 bootstrap re-fits; printed as seconds and as a ratio to the 60 s goal on 2 cores.
Coverage (--coverage SEEDS): for every law, synthetic tables from its paper constants on a paper-like grid;
the share of (seed, parameter) pairs whose 95 % CI contains the true value.
"""

import os
import time

import numpy as np
import pandas as pd

from qscaling.laws import LAWS, fit, start_sample
from qscaling.laws.synthetic import group_column, paper_grid, synthetic_table

GOAL_SECONDS = 60.0


def add_arguments(parser) -> None:
    parser.add_argument("--points", type=int, default=200, help="synthetic points (default 200)")
    parser.add_argument("--grid", type=int, default=4, help="start values per parameter (default 4: 4^5 starts)")
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap re-fits (default 1000)")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)), help="worker processes")
    parser.add_argument(
        "--coverage",
        type=int,
        default=0,
        metavar="SEEDS",
        help="also measure CI coverage for every law over this many seeds",
    )
    parser.add_argument("--coverage-bootstrap", type=int, default=200, help="bootstrap re-fits per coverage fit")
    parser.add_argument("--noise", type=float, default=0.01, help="relative noise of synthetic data (default 0.01)")


def chinchilla_points(count: int, seed: int = 0) -> pd.DataFrame:
    """Log-uniform N in [7e7, 1.6e10] and 2–500 tokens per parameter, like Hoffmann et al.'s runs."""
    rng = np.random.default_rng(seed)
    N = 10 ** rng.uniform(np.log10(7e7), np.log10(1.6e10), count)
    return pd.DataFrame({"N": N, "D": N * 10 ** rng.uniform(np.log10(2), np.log10(500), count)})


def time_fit(args) -> float:
    law = LAWS["chinchilla"]
    truth = law.paper_params["epoch2024"]
    table = synthetic_table(law, truth, chinchilla_points(args.points), args.noise, seed=0)
    start = time.perf_counter()
    result = fit(law, table, starts=args.grid, bootstrap=args.bootstrap, seed=0, n_jobs=args.jobs)
    seconds = time.perf_counter() - start
    print(
        f"fit chinchilla: {args.points} points, {result.n_starts} starts, {args.bootstrap} bootstraps, "
        f"{args.jobs} jobs: {seconds:.1f} s = {seconds / GOAL_SECONDS:.2f}x the {GOAL_SECONDS:.0f} s goal"
    )
    for name in law.param_names:
        low, high = result.ci[name]
        print(f"  {name:>6} truth {truth[name]:<8.4g} fit {result.params[name]:<10.4g} CI [{low:.4g}, {high:.4g}]")
    return seconds


def coverage(law, seeds: int, bootstrap: int, noise: float, jobs: int) -> float:
    """Share of (seed, parameter) pairs whose CI contains the paper value the data was drawn from."""
    truth = law.default_paper_params()
    grid = paper_grid(law)
    hits = []
    for seed in range(seeds):
        table = synthetic_table(law, truth, grid, noise, seed)
        starts = start_sample(law, 32, seed) if len(law.params) > 8 else None
        result = fit(
            law, table, starts=starts, bootstrap=bootstrap, group_col=group_column(law), seed=seed, n_jobs=jobs
        )
        hits += [result.ci[name][0] <= truth[name] <= result.ci[name][1] for name in law.param_names]
    return float(np.mean(hits))


def run(args) -> int:
    time_fit(args)
    if args.coverage:
        print(f"\nCI coverage, {args.coverage} seeds, {args.coverage_bootstrap} bootstraps, noise {args.noise:.0%}:")
        for name, law in LAWS.items():
            if not law.paper_params:  # Kumar et al.'s Table 1 forms: no constants to cover
                continue
            start = time.perf_counter()
            share = coverage(law, args.coverage, args.coverage_bootstrap, args.noise, args.jobs)
            print(
                f"  {name:<28} {share:6.1%} of (seed, parameter) CIs contain the truth "
                f"({time.perf_counter() - start:.0f} s)"
            )
    return 0
