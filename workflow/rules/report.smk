# The HTML report's tables and the run manifest. `snakemake --report report.html` collects every output marked
# with report() in the DAG of the default target: the figures (captions in workflow/report/), the claims table
# (rule collect_claims) and the fitted-law table below.
import os
from pathlib import Path
from types import SimpleNamespace

from qscaling.provenance import write_manifest


report: "../report/workflow.rst"


rule report_fit_table:
    input:
        fits=[path for study in STUDIES for path in study_fits(study).values()],
    output:
        table=report("results/report/fits.csv", caption="../report/fits.rst", category="fitted laws"),
    log:
        "logs/report/fits.log",
    benchmark:
        "benchmarks/report/fits.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    message:
        "Tabulating every fitted law for the report"
    run:
        from qscaling.diff import fits_table
        from qscaling.provenance import job_context

        job = SimpleNamespace(
            rule=rule,
            input=input,
            output=output,
            params=params,
            wildcards=wildcards,
            log=log,
            threads=threads,
            config=config,
        )
        with job_context(job):
            table = fits_table(input.fits)
            tmp = Path(output.table).with_name(".fits.csv.tmp")
            table.to_csv(tmp, index=False, float_format="%.6g", lineterminator="\n")
            os.replace(tmp, output.table)


REPORT_TABLES = rules.report_fit_table.output


# Records are merged into results/manifest.json as each job finishes; at the end (success or failure) the
# manifest is rebuilt from the records so that it lists exactly what this working directory holds.
onsuccess:
    write_manifest(".")


onerror:
    write_manifest(".")
