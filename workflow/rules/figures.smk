# Every declared figure (qscaling.figures.figure, next to its function): one rule per target, named like it
# (kumar2024_fig2 → figures/kumar2024/fig2.png), calling the function on the named tables (.parquet) and fits (.json).
FIGURE_OUTPUTS = [path for spec, _ in PIPELINE.figures for path in spec.outputs.values()]

for spec, figure_inputs in PIPELINE.figures:
    caption = os.path.join(workflow.basedir, spec.caption or os.path.join("workflow", "report", f"{spec.target}.rst"))

    rule:
        name:
            spec.target
        input:
            **figure_inputs,
        output:
            **{kind: report(path, caption=caption, category=spec.paper) for kind, path in spec.outputs.items()},
        log:
            f"logs/figures/{spec.paper}/{spec.name}.log",
        benchmark:
            f"benchmarks/figures/{spec.paper}/{spec.name}.tsv"
        conda:
            CONDA_ENV
        threads: 1
        resources:
            mem_mb=2000,
            runtime=5,
        params:
            function=spec.function,
            frame=spec.frame,
            options=dict(spec.options),
        message:
            f"Rendering {spec.target}"
        script:
            "../scripts/render_figure.py"
