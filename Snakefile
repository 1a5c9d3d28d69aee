# qscaling: config → runs → checkpoints → evaluations (tidy parquet) → fits (json) → figures.
# Build everything: `snakemake --cores all`; one figure: `snakemake common_learning_curves` (or its path).


# The embedded default lives next to this file, so `--directory` elsewhere still finds it.
configfile: os.path.join(workflow.basedir, "config.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/studies.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        FIGURE_OUTPUTS,
        rules.collect_claims.output,
        REPORT_TABLES,
