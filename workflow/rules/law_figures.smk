# Figures that need only a scaling law: drawn from the papers' constants, plus this run's fit where the
# workflow has one (`LAW_FIGURE_FITS`: target -> named fit JSONs, defined by the studies in common.smk; a
# Snakefile that includes only this file draws the papers' constants alone).
LAW_FIGURE_FITS = globals().get("LAW_FIGURE_FITS", {})

LAW_FIGURES = [
    "figures/ouyang2024/fig1.png",
    "figures/sun2025/fig5.png",
    "figures/sun2025/fig6.png",
    "figures/sun2025/fig7.png",
    "figures/sun2025/fig14.png",
    "figures/kumar2024/fig3_left.png",
    "figures/kumar2024/fig6_right.png",
    "figures/kumar2024/fig9.png",
    "figures/chen2025/fig1.png",
    "figures/chen2025/fig16.png",
    "figures/ouyang2024/table1.csv",
    "figures/ouyang2024/table1.png",
]


rule ouyang2024_fig1:
    input:
        **LAW_FIGURE_FITS.get("ouyang2024_fig1", {}),
    output:
        report(
            "figures/ouyang2024/fig1.png",
            caption="../report/ouyang2024_fig1.rst",
            category="ouyang2024",
        ),
    log:
        "logs/figures/ouyang2024/fig1.log",
    benchmark:
        "benchmarks/figures/ouyang2024/fig1.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.ouyang2024:fig1",
    message:
        "Rendering ouyang2024 fig1: the paper's constants and this run's QiD fit"
    script:
        "../scripts/render_figure.py"


rule sun2025_fig5:
    output:
        report(
            "figures/sun2025/fig5.png",
            caption="../report/sun2025_fig5.rst",
            category="sun2025",
        ),
    log:
        "logs/figures/sun2025/fig5.log",
    benchmark:
        "benchmarks/figures/sun2025/fig5.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.sun2025:fig5",
    message:
        "Rendering sun2025 fig5 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule sun2025_fig6:
    output:
        report(
            "figures/sun2025/fig6.png",
            caption="../report/sun2025_fig6.rst",
            category="sun2025",
        ),
    log:
        "logs/figures/sun2025/fig6.log",
    benchmark:
        "benchmarks/figures/sun2025/fig6.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.sun2025:fig6",
    message:
        "Rendering sun2025 fig6 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule sun2025_fig7:
    output:
        report(
            "figures/sun2025/fig7.png",
            caption="../report/sun2025_fig7.rst",
            category="sun2025",
        ),
    log:
        "logs/figures/sun2025/fig7.log",
    benchmark:
        "benchmarks/figures/sun2025/fig7.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.sun2025:fig7",
    message:
        "Rendering sun2025 fig7 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule sun2025_fig14:
    output:
        report(
            "figures/sun2025/fig14.png",
            caption="../report/sun2025_fig14.rst",
            category="sun2025",
        ),
    log:
        "logs/figures/sun2025/fig14.log",
    benchmark:
        "benchmarks/figures/sun2025/fig14.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.sun2025:fig14",
    message:
        "Rendering sun2025 fig14 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule kumar2024_fig3_left:
    output:
        report(
            "figures/kumar2024/fig3_left.png",
            caption="../report/kumar2024_fig3_left.rst",
            category="kumar2024",
        ),
    log:
        "logs/figures/kumar2024/fig3_left.log",
    benchmark:
        "benchmarks/figures/kumar2024/fig3_left.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.kumar2024:fig3_left",
    message:
        "Rendering kumar2024 fig3_left from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule kumar2024_fig6_right:
    output:
        report(
            "figures/kumar2024/fig6_right.png",
            caption="../report/kumar2024_fig6_right.rst",
            category="kumar2024",
        ),
    log:
        "logs/figures/kumar2024/fig6_right.log",
    benchmark:
        "benchmarks/figures/kumar2024/fig6_right.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.kumar2024:fig6_right",
    message:
        "Rendering kumar2024 fig6_right from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule kumar2024_fig9:
    output:
        report(
            "figures/kumar2024/fig9.png",
            caption="../report/kumar2024_fig9.rst",
            category="kumar2024",
        ),
    log:
        "logs/figures/kumar2024/fig9.log",
    benchmark:
        "benchmarks/figures/kumar2024/fig9.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.kumar2024:fig9",
    message:
        "Rendering kumar2024 fig9 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule chen2025_fig1:
    output:
        report(
            "figures/chen2025/fig1.png",
            caption="../report/chen2025_fig1.rst",
            category="chen2025",
        ),
    log:
        "logs/figures/chen2025/fig1.log",
    benchmark:
        "benchmarks/figures/chen2025/fig1.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.chen2025:fig1",
    message:
        "Rendering chen2025 fig1 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule chen2025_fig16:
    output:
        report(
            "figures/chen2025/fig16.png",
            caption="../report/chen2025_fig16.rst",
            category="chen2025",
        ),
    log:
        "logs/figures/chen2025/fig16.log",
    benchmark:
        "benchmarks/figures/chen2025/fig16.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        function="qscaling.figures.chen2025:fig16",
    message:
        "Rendering chen2025 fig16 from the paper's constants"
    script:
        "../scripts/render_figure.py"


rule ouyang2024_table1:
    input:
        **LAW_FIGURE_FITS.get("ouyang2024_table1", {}),
    output:
        csv=report(
            "figures/ouyang2024/table1.csv",
            caption="../report/ouyang2024_table1.rst",
            category="ouyang2024",
        ),
        png=report(
            "figures/ouyang2024/table1.png",
            caption="../report/ouyang2024_table1.rst",
            category="ouyang2024",
        ),
    log:
        "logs/figures/ouyang2024/table1.log",
    benchmark:
        "benchmarks/figures/ouyang2024/table1.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        table="qscaling.figures.ouyang2024:table1_frame",
        function="qscaling.figures.ouyang2024:table1",
    message:
        "Rendering ouyang2024 table1 (CSV and image): the paper's constants and this run's QiD fit"
    script:
        "../scripts/law_table.py"
