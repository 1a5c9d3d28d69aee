# The HTML report's tables and the run manifest. `snakemake --report report.html` collects every output marked
# with report() in the DAG of the default target: the figures (captions in workflow/report/), the claims table
# (rule collect_claims) and the fitted-law table below.
from qscaling.provenance import write_manifest


report: "../report/workflow.rst"


rule report_fit_table:
    input:
        fits=[path for fits in PIPELINE.fits.values() for path in fits.values()],
    output:
        table=report("results/report/fits.csv", caption="../report/fits.rst", category="fitted laws"),
    log:
        "logs/report/fits.log",
    benchmark:
        "benchmarks/report/fits.tsv"
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    message:
        "Tabulating every fitted law for the report"
    script:
        "../scripts/report_fit_table.py"


REPORT_TABLES = rules.report_fit_table.output


# Records are merged into results/manifest.json as each job finishes; at the end (success or failure) the
# manifest is rebuilt from the records so that it lists exactly what this working directory holds.
onsuccess:
    write_manifest(".")


onerror:
    write_manifest(".")
