# Everything that is not a rule: the validated config, the planned runs and evaluations, and input functions.
from qscaling.config import corpus_id, resolve_config
from qscaling.studies import learning_curve_runs, plan_all, study_modules

config = resolve_config(config)
CORPUS = corpus_id(config)
PLANNER, EVALUATIONS = plan_all(config, CORPUS)
RUNS = PLANNER.runs  # trained here
HUB_RUNS = PLANNER.hub_runs  # imported from released checkpoints (paper scale)
STUDIES = study_modules()
DEVICE = config["device"]


wildcard_constraints:
    run="|".join([*RUNS, *HUB_RUNS]),
    corpus=CORPUS,
    study="|".join(STUDIES),
    tokens=r"\d+",


def get_trunk_inputs(wildcards):
    """A WSD cooldown branch starts from its trunk's saved state: the trunk must have run first."""
    trunk = PLANNER.trunk_of(wildcards.run)
    return [f"results/runs/{trunk}/run.json"] if trunk else []


def get_held_out(wildcards):
    """The held-out sets a study scores on: always val, plus the out-of-domain set where one is configured."""
    held_out = {"val": f"results/data/{CORPUS}/val.bin"}
    if config["evaluation"]["ood_source"] and any(
        "ood" in q.splits for q in STUDIES[wildcards.study].quantizations(config)
    ):
        held_out["ood"] = f"results/data/{CORPUS}/ood.bin"
    return held_out


def get_study_evaluations(wildcards):
    return [f"results/ptq/{e.study}/{e.run}/{e.tokens}.parquet" for e in EVALUATIONS[wildcards.study]]


def study_table(study):
    return f"results/tables/{study}.parquet"


def study_fits(study):
    names = STUDIES[study].fit_names(config)
    return {name: f"results/fits/{study}/{name}.json" for name in names}


LEARNING_CURVE_RUNS = learning_curve_runs(config, PLANNER)
# Law-only figures that overlay this run's fit next to the paper's constants.
LAW_FIGURE_FITS = {
    target: {"qid": study_fits("ouyang2024")["qid"]} for target in ("ouyang2024_fig1", "ouyang2024_table1")
}
ALL_FIGURES = ["figures/common/learning_curves.png"]
