"""What several studies' grids share at parse time (torch-free): points trained beside a full-precision partner,
the scorings of post-training quantization and of models as trained, and your own checkpoints as sizes."""

from dataclasses import dataclass, field
from pathlib import Path

from qscaling.config import Common
from qscaling.layout import Layout
from qscaling.settings import ConfigError, LocalModel
from qscaling.studies.study import Evaluation, Job, Scoring

SCORING = "qscaling.studies.scoring"  # the job-time module every shared scoring calls into


@dataclass(frozen=True)
class PartneredPoint:
    """A run trained at `precision` (a `training_precision`) beside its full-precision partner: the same size,
    budget and `recipe` (seed, learning rate), the partner's checkpoint labelled `partner_label`; `branched`: the
    run starts from the partner's trunk after its warmup instead of from scratch (`Planner.after_warmup`)."""

    size: str
    budget: int
    precision: dict
    label: tuple
    partner_label: tuple
    recipe: dict = field(default_factory=dict)
    branched: bool = False


def check_branched(key: str, settings) -> None:
    """`branched` starts each quantized run from its partner's WSD trunk, which a study annealing by cosine lacks."""
    if settings.branched and settings.anneal != "wsd":
        raise ConfigError(f"config key {key}.branched: a run branches from its partner's WSD trunk; set anneal: wsd")


def partnered_evaluations(study: str, settings, planner, points) -> list[Evaluation]:
    """Each `PartneredPoint`'s run and its partner, annealed by the study's `anneal` and `cooldown_fraction`:
    one evaluation per checkpoint with every label it carries (a partner shared by several points keeps its first
    label)."""
    labels = {}
    for point in points:
        annealed = (point.size, point.budget, settings.anneal, settings.cooldown_fraction)
        start = {"start_from": planner.after_warmup(point.size, **point.recipe)} if point.branched else {}
        run = planner.annealed(*annealed, training_precision=point.precision, **point.recipe, **start)
        labels.setdefault((run, point.budget), []).append(point.label)
        partner = planner.annealed(*annealed, **point.recipe)
        labels.setdefault((partner, point.budget), [point.partner_label])
    return [Evaluation(study, run, tokens, tuple(variants)) for (run, tokens), variants in labels.items()]


def ptq_scoring(study: str, settings, common: Common, layout: Layout, quantizations) -> Scoring:
    """Post-training quantization of every checkpoint (`qscaling.studies.scoring.score_job`): held-out val (and
    ood where a quantization scores it), calibration windows from the training shard; the study's settings give
    `calibration` and `eval_tokens`."""
    inputs = {"val": layout.data("val.bin"), "calibration": layout.data("train.bin")}
    if common.evaluation.ood_source and any("ood" in q.splits for q in quantizations):
        inputs["ood"] = layout.data("ood.bin")
    params = {
        "study": study,
        "quantizations": [q.__dict__ for q in quantizations],
        "calibration": settings.calibration.model_dump(),
        "eval_tokens": settings.eval_tokens,
        "batch_size": common.evaluation.batch_size,
        "gptq_damp": common.ptq.gptq_damp,
    }
    return Scoring(f"{SCORING}:score_job", inputs, params, message="Quantizing and scoring")


def as_trained_scoring(settings, common: Common, layout: Layout) -> Scoring:
    """Every checkpoint evaluated as it trained on the held-out windows: the scoring of a study whose δ pairs
    separately trained runs, with the study's `eval_tokens`."""
    params = {"eval_tokens": settings.eval_tokens, "batch_size": common.evaluation.batch_size}
    return Scoring(f"{SCORING}:score_as_trained", {"val": layout.data("val.bin")}, params, message="Scoring as trained")


def collect_job(study: str, output: str, evaluations, layout: Layout, function: str, message: str) -> Job:
    """Rule `<study>_<output>`: the per-checkpoint `output` tables the study's scoring wrote, read as the list
    `inputs["scored"]` by `function` ("module:name"), which writes them as one table."""
    scored = [layout.scored(study, output, e.run, e.tokens) for e in evaluations]
    return Job(output, function, {"scored": scored}, {output: layout.table(study, output)}, message=message)


def check_local_models(key: str, entries: list[LocalModel] | None) -> None:
    """`source: local` entries name HF-format directories or hub ids, one checkpoint per (label, tokens); a hub id
    is fetched by its job, where a hub is reachable."""
    if not entries:
        raise ConfigError(f"config key {key}: source 'local' needs at least one {{label:, path:, tokens:}}")
    seen = {}
    for index, entry in enumerate(entries):
        if (entry.path is None) == (entry.repo is None):
            raise ConfigError(f"config key {key}.{index}: give either path (a local directory) or repo (a hub id)")
        if entry.path is not None and not (Path(entry.path) / "config.json").is_file():
            raise ConfigError(f"config key {key}.{index}.path: {entry.path} is not an HF-format model directory "
                              "(no config.json)")  # fmt: skip
        where = seen.setdefault((entry.label, entry.tokens), index)
        if where != index:
            raise ConfigError(f"config key {key}.{index}: {entry.label} at {entry.tokens} tokens is also entry {where}")


def local_evaluations(study: str, entries: list[LocalModel], planner) -> list[Evaluation]:
    """One evaluation per `source: local` entry: your own checkpoints imported as sizes of the study."""
    evaluations = []
    for entry in entries:
        if entry.path is not None:
            run = planner.local(entry.label, entry.tokens, entry.path)
        else:
            run = planner.hub(entry.repo, entry.label, {entry.tokens: entry.revision or "main"})
        evaluations.append(Evaluation(study, run, entry.tokens))
    return evaluations
