"""Studies: each paper's grid as runs and evaluations, its tidy table, the laws it fits and the claims it checks.

A study is a plug-in (`study.Study`, registered as a module's `STUDY`); each built-in one is a package split by
when its code runs — settings, grid (torch-free, read while the DAG is built), score (job time, torch), analysis
(tables → fits and claims), figures. What several studies share has one home each: `registry` (which study a
config block names, its typed settings), `grids` (partnered points, PTQ and as-trained scorings, your own
checkpoints), `scoring` (the job-time scoring loop), `tables` (labels, diverged rows, partnered δ), `claims`
(verdicts). Generic code — the workflow's rules and scripts, `qscaling.pipeline` — names no study. See
docs/adding-a-study.md.
"""
