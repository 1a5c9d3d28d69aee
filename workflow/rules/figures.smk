rule common_learning_curves:
    input:
        curves=rules.collect_learning_curves.output.table,
    output:
        report(
            "figures/common/learning_curves.png",
            caption="../report/common_learning_curves.rst",
            category="common",
        ),
    params:
        function="qscaling.figures.common:learning_curves",
    log:
        "logs/figures/common/learning_curves.log",
    benchmark:
        "benchmarks/figures/common/learning_curves.tsv"
    message:
        "Rendering {output}"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    script:
        "../scripts/render_figure.py"
