# Everything that is not a rule: the validated config, the planned runs, and input functions.
from qscaling.config import corpus_id, learning_curve_runs, plan_runs, resolve_config

config = resolve_config(config)
CORPUS = corpus_id(config)
RUNS = plan_runs(config)
DEVICE = config["device"]


wildcard_constraints:
    run="|".join(RUNS) or "NO_RUNS",
    corpus=CORPUS,


def get_run_plan(wildcards):
    return RUNS[wildcards.run]


def get_trunk_inputs(wildcards):
    """A WSD cooldown branch starts from its trunk's saved state: the trunk must have run first."""
    cooldown = RUNS[wildcards.run].spec.cooldown
    return [f"results/runs/{cooldown['trunk']}/run.json"] if cooldown else []


ALL_FIGURES = ["figures/common/learning_curves.png"]
