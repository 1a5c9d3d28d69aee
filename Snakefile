# qscaling: config → runs → checkpoints → evaluations (tidy parquet) → fits (json) → figures.
# Build everything: `snakemake --cores all`; one figure: `snakemake common_learning_curves` (or its path).


configfile: "config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/law_figures.smk"


rule all:
    input:
        ALL_FIGURES,
        LAW_FIGURES,
    default_target: True
