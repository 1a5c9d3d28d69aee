rule common_learning_curves:
    input:
        curves=rules.collect_learning_curves.output.table,
    output:
        report(
            "figures/common/learning_curves.png",
            caption="../report/common_learning_curves.rst",
            category="common",
        ),
    log:
        "logs/figures/common/learning_curves.log",
    benchmark:
        "benchmarks/figures/common/learning_curves.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    params:
        function="qscaling.figures.common:learning_curves",
    message:
        "Rendering {output}"
    script:
        "../scripts/render_figure.py"


# Study figures: one rule per target, named like it (kumar2024_fig2 → figures/kumar2024/fig2.png), each calling
# qscaling.figures.<paper>:<figure> on the named tables (.parquet) and fits (.json) below.
KUMAR = {"ptq": study_table("kumar2024"), **study_fits("kumar2024")}
OUYANG = {
    "evals": study_table("ouyang2024"),
    "one_factor": rules.fit_ouyang2024.output.one_factor,
    "weight_changes": rules.ouyang2024_weight_changes.output.table,
    **study_fits("ouyang2024"),
}
STUDY_FIGURES = {
    **{f"kumar2024_{name}": KUMAR for name in ("fig1_left", "fig2", "fig10", "fig11", "fig12", "fig19")},
    **{f"ouyang2024_fig{n}": OUYANG for n in (2, 3, 4, 5, 6, 7, 8, 9, 11, 12)},
}
ALL_FIGURES += [f"figures/{target.replace('_', '/', 1)}.png" for target in STUDY_FIGURES]

for target, figure_inputs in STUDY_FIGURES.items():
    paper, figure = target.split("_", 1)

    rule:
        name:
            target
        input:
            **figure_inputs,
        output:
            report(f"figures/{paper}/{figure}.png", caption=f"../report/{target}.rst", category=paper),
        log:
            f"logs/figures/{paper}/{figure}.log",
        benchmark:
            f"benchmarks/figures/{paper}/{figure}.tsv"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=5,
        params:
            function=f"qscaling.figures.{paper}:{figure}",
        message:
            f"Rendering {target}"
        script:
            "../scripts/render_figure.py"
