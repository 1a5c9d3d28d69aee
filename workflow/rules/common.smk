# Everything that is not a rule: the validated config, the planned runs and evaluations, every study's declared
# jobs and artifacts, and every declared figure with its inputs. No study is named here: see qscaling.studies.
from qscaling.config import corpus_id, resolve_config
from qscaling.figures import declared_figures, figure_inputs, figure_modules
from qscaling.studies import Layout, artifacts, fit_names, jobs, learning_curve_runs, plan_all, settings, study_modules

config = resolve_config(config)
CORPUS = corpus_id(config)
PLANNER, EVALUATIONS = plan_all(config, CORPUS)
RUNS = PLANNER.runs  # trained here
HUB_RUNS = PLANNER.hub_runs  # imported from released checkpoints (paper scale)
STUDIES = study_modules(config)
DEVICE = config["device"]
GPU = 1 if DEVICE == "cuda" else 0
LAYOUT = Layout(CORPUS)
LEARNING_CURVE_RUNS = learning_curve_runs(config, PLANNER)
# The conda environment every job runs in under --use-conda (without it, the current environment).
CONDA_ENV = "../envs/qscaling.yaml"


wildcard_constraints:
    run="|".join([*RUNS, *HUB_RUNS]),
    corpus=CORPUS,
    study="|".join(STUDIES),
    tokens=r"\d+",


def get_trunk_inputs(wildcards):
    """A WSD cooldown branch starts from its trunk's saved state: the trunk must have run first."""
    trunk = PLANNER.trunk_of(wildcards.run)
    return [f"results/runs/{trunk}/run.json"] if trunk else []


SCORING = {study: module.scoring(config, LAYOUT) for study, module in STUDIES.items()}
# (study, run, tokens) -> the variant labels of that checkpoint's rows
SCORED_LABELS = {(e.study, e.run, str(e.tokens)): e.label_records() for es in EVALUATIONS.values() for e in es}
STUDY_JOBS = {study: jobs(module, config, EVALUATIONS[study], LAYOUT) for study, module in STUDIES.items()}
STUDY_FITS = {
    study: {name: LAYOUT.fit(study, name) for name in fit_names(module, config)} for study, module in STUDIES.items()
}
FIT_TABLES = {
    study: {name: LAYOUT.fit_table(study, name) for name in getattr(module, "FIT_TABLES", ())}
    for study, module in STUDIES.items()
}
# Each study's tables by name ("table", its jobs' and fits' tables): what its claims read.
STUDY_ARTIFACTS = {study: artifacts(module, STUDY_JOBS[study], LAYOUT) for study, module in STUDIES.items()}
# Each study's own tables its fits read besides its tidy table (the module's FIT_INPUTS).
FIT_INPUTS = {
    study: {name: STUDY_ARTIFACTS[study][name] for name in getattr(module, "FIT_INPUTS", ())}
    for study, module in STUDIES.items()
}
# Artifact id -> path: what figures read ("learning_curves", "<study>", "<study>/<table>").
ARTIFACTS = {"learning_curves": "results/tables/learning_curves.parquet"}
for study, named in STUDY_ARTIFACTS.items():
    ARTIFACTS.update({study if name == "table" else f"{study}/{name}": path for name, path in named.items()})

FIGURES = []  # (spec, named inputs)
for figure_module in figure_modules([m.FIGURES for m in STUDIES.values() if hasattr(m, "FIGURES")]):
    for spec in declared_figures(figure_module):
        inputs = figure_inputs(spec, ARTIFACTS, STUDY_FITS)
        if inputs is not None:
            FIGURES.append((spec, inputs))
