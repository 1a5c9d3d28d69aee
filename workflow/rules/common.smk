# Everything that is not a rule: the planned workflow (qscaling.pipeline) — the typed config, every planned run
# and scored checkpoint, every study's jobs, fits and tables, every declared figure with its inputs — and the
# paths of every artifact (qscaling.layout). No study is named here.
from pathlib import Path

from qscaling.pipeline import Pipeline
from qscaling.public import public_tables

# Published tables of quantized public models, shipped beside this workflow (data/public/README.md), each drawn in
# a figure of its own; a bad one stops the run here, before any job.
PUBLIC_TABLES = public_tables(Path(workflow.current_basedir).parents[1] / "data" / "public")
PIPELINE = Pipeline.from_config(config, PUBLIC_TABLES)
CONFIG = PIPELINE.config
LAYOUT = PIPELINE.layout
CORPUS = LAYOUT.corpus
RUNS = PIPELINE.runs  # trained here
HUB_RUNS = PIPELINE.hub_runs  # imported from released checkpoints (paper scale)
STUDIES = PIPELINE.studies
DEVICE = CONFIG.device
GPU = 1 if DEVICE == "cuda" else 0
SCORED_LABELS = PIPELINE.scored_labels()
# The conda environment every job runs in under --use-conda (without it, the current environment).
CONDA_ENV = "../envs/qscaling.yaml"


wildcard_constraints:
    run="|".join([*RUNS, *HUB_RUNS]),
    study="|".join(STUDIES),
    tokens=r"\d+",


def get_trunk_inputs(wildcards):
    """A WSD cooldown branch starts from its trunk's saved state: the trunk must have run first."""
    trunk = PIPELINE.planner.trunk_of(wildcards.run)
    return [LAYOUT.run_summary(trunk)] if trunk else []
