"""`qscaling predict --N … --D …`: every applicable law's prediction for a planned run.

Sources are the papers' constants (every variant) and any `--fit FILE.json`. What a law predicts depends on what
the plan gives: N and D alone give losses, Kumar et al.'s N_eff at 16 bits and P*, and Sun et al.'s D_crit at
bf16; `--ptq` adds δ_PTQ, QiD and the post-PTQ loss; `--train int…` adds δ_QAT and N_eff at the training
precision; `--train fp:…` gives Sun et al.'s loss and D_crit for that format. QuEST's law takes an int training
precision as its P, Quartet's an fp one as the precision of both passes.
"""

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from qscaling.laws import LAWS, Fit, chen2025, efficiency2025, fit, kumar2024, load_fit, sun2025
from qscaling.quant.spec import QuantSpec, parse_spec

LOSS = "loss (nats/token)"
LOSS_AFTER_PTQ = "loss after PTQ"
DELTA_PTQ = "δ_PTQ"
QID = "QiD"
DELTA_QAT = "δ_QAT"
N_EFF = "N_eff (parameters)"
P_STAR = "P* compute-optimal (bits)"
P_STAR_AT_N = "P* at this N and D (bits)"
D_CRIT_PTQ = "D_crit PTQ (tokens)"
D_CRIT = "D_crit (tokens)"
QUANTITIES = (LOSS, LOSS_AFTER_PTQ, DELTA_PTQ, QID, DELTA_QAT, N_EFF, P_STAR, P_STAR_AT_N, D_CRIT_PTQ, D_CRIT)

# A run without --train is a 16-bit run; the KV cache stays at 16 bits in every plan, as --train quantizes
# only the GEMM inputs (weights and activations).
HIGH_PRECISION_BITS = 16
# bf16 read as Sun et al.'s E8M7 with B = 128: the setting the paper quotes D_crit for (Sec. 4.2).
BF16_AS_SUN_FORMAT = (8, 7, 128)
COUNT_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}


@dataclass(frozen=True)
class Plan:
    """A planned run: N non-embedding parameters, D training tokens, optional PTQ and training precision."""

    N: float
    D: float
    ptq_method: str | None = None
    ptq: "QuantSpec | None" = None
    train: "QuantSpec | None" = None  # weights and activations

    @property
    def post_bits(self) -> int | None:
        return self.ptq.bits if self.ptq is not None else None

    @property
    def kumar_training_bits(self) -> dict[str, float] | None:
        """P_w, P_a, P_kv of Kumar et al.'s N_eff law; None for fp training, which that law does not cover."""
        if self.train is None:
            return {"P_w": HIGH_PRECISION_BITS, "P_a": HIGH_PRECISION_BITS, "P_kv": HIGH_PRECISION_BITS}
        if self.train.kind != "int":
            return None
        return {"P_w": self.train.bits, "P_a": self.train.bits, "P_kv": HIGH_PRECISION_BITS}

    @property
    def chen_group_size(self) -> int | None:
        """Chen et al.'s G: only a group size is known here (per-channel G would be the unknown row length)."""
        if self.train is None or self.train.kind != "int" or self.train.granularity != "group":
            return None
        return self.train.group_size

    @property
    def sun_format(self) -> tuple[int, int, float] | None:
        """(E, M, B) of Sun et al.'s law; channel-wise scaling acts like B = 2^13.1567 (Sec. 4)."""
        if self.train is None:
            return BF16_AS_SUN_FORMAT
        if self.train.kind != "fp":
            return None
        if self.train.granularity == "group":
            block = self.train.group_size
        elif self.train.granularity in ("channel", "token"):
            block = 2.0**sun2025.CHANNELWISE_LOG2_BLOCK
        else:
            return None
        return self.train.exponent_bits, self.train.mantissa_bits, block

    def train_bits(self, kind: str) -> int | None:
        """Total bits of an `kind` ("int" or "fp") training precision; 16 without --train, None for the other kind."""
        if self.train is None or self.train.kind != kind:
            return HIGH_PRECISION_BITS if self.train is None else None
        return self.train.bits if kind == "int" else self.train.exponent_bits + self.train.mantissa_bits + 1


@dataclass(frozen=True)
class Prediction:
    source: str
    law: str
    quantity: str
    value: float
    interval: tuple[float, float] | None
    interval_method: str


def _evaluate(law, params, **inputs) -> float:
    return float(law(params, inputs)[0])


def _baseline_loss(law, params, plan: Plan) -> dict[str, float]:
    return {LOSS: _evaluate(law, params, N=plan.N, D=plan.D)}


def _kumar_training(law, params, plan: Plan) -> dict[str, float]:
    quantities = {
        P_STAR: kumar2024.compute_optimal_precision(params),
        P_STAR_AT_N: kumar2024.fixed_size_optimal_precision(params, plan.N, plan.D),
    }
    bits = plan.kumar_training_bits
    if bits is not None:
        quantities[LOSS] = _evaluate(law, params, N=plan.N, D=plan.D, **bits)
        quantities[N_EFF] = float(kumar2024.effective_parameters(params, {"N": plan.N, **bits}))
    return quantities


def _kumar_ptq(law, params, plan: Plan) -> dict[str, float]:
    if plan.post_bits is None:
        return {}
    return {
        DELTA_PTQ: _evaluate(law, params, N=plan.N, D=plan.D, P_post=plan.post_bits),
        D_CRIT_PTQ: float(kumar2024.ptq_critical_data_size(params, plan.N, plan.post_bits)),
    }


def _kumar_unified(law, params, plan: Plan) -> dict[str, float]:
    bits = plan.kumar_training_bits
    if plan.post_bits is None or bits is None:
        return {}
    return {LOSS_AFTER_PTQ: _evaluate(law, params, N=plan.N, D=plan.D, P_post=plan.post_bits, **bits)}


def _ouyang_qid(law, params, plan: Plan) -> dict[str, float]:
    if plan.post_bits is None:
        return {}
    return {QID: _evaluate(law, params, N=plan.N, D=plan.D, P=plan.post_bits)}


def _ouyang_qid_fixed_bits(law, params, plan: Plan) -> dict[str, float]:
    # Which bit width applies is the paper variant's name ("4bit"); _paper_variants picks the matching one.
    if plan.post_bits is None:
        return {}
    return {QID: _evaluate(law, params, N=plan.N, D=plan.D)}


def _chen_qat(law, params, plan: Plan) -> dict[str, float]:
    G = plan.chen_group_size
    if G is None:
        return {}
    multiplier = chen2025.effective_parameter_multiplier(params, plan.N, plan.D, G)
    return {DELTA_QAT: _evaluate(law, params, N=plan.N, D=plan.D, G=G), N_EFF: float(multiplier * plan.N)}


def _sun_fp_training(law, params, plan: Plan) -> dict[str, float]:
    if plan.sun_format is None:
        return {}
    E, M, B = plan.sun_format
    return {
        LOSS: _evaluate(law, params, N=plan.N, D=plan.D, E=E, M=M, B=B),
        D_CRIT: float(sun2025.critical_data_size(params, plan.N, E, M, B)),
    }


def _efficiency(law, params, plan: Plan) -> dict[str, float]:
    bits = plan.train_bits(efficiency2025.TRAINING_KIND[law.name])
    found = efficiency2025.loss_and_size(law, params, plan.N, plan.D, bits)
    return {} if found is None else {LOSS: found[0], N_EFF: found[1]}


@dataclass(frozen=True)
class Predictor:
    """What one law predicts for a plan ({} when the plan lacks its inputs), and what those inputs are."""

    function: Callable[..., dict[str, float]]
    needs: str


PREDICTORS = {
    "chinchilla": Predictor(_baseline_loss, "--N and --D"),
    "chinchilla_tied": Predictor(_baseline_loss, "--N and --D"),
    "kaplan": Predictor(_baseline_loss, "--N and --D"),
    "kumar2024.neff": Predictor(_kumar_training, "--N and --D"),
    "kumar2024.ptq": Predictor(_kumar_ptq, "--ptq METHOD:int<b>:..."),
    "kumar2024.unified": Predictor(_kumar_unified, "--ptq METHOD:int<b>:... and an integer --train (or none)"),
    "ouyang2024.qid": Predictor(_ouyang_qid, "--ptq METHOD:int<b>:..."),
    "ouyang2024.qid_fixed_bits": Predictor(_ouyang_qid_fixed_bits, "--ptq at the variant's bit width"),
    "chen2025.qat": Predictor(_chen_qat, "--train int<b>:g<G>"),
    "sun2025.capybara": Predictor(_sun_fp_training, "--train fp:e<E>m<M>:b<B> or channel (or no --train)"),
    "panferov2025.quest": Predictor(_efficiency, "--train int<b>, b in 2, 3, 4, 8 (or no --train)"),
    "castro2025.quartet": Predictor(_efficiency, "--train fp:e<E>m<M> of 4 or >= 8 bits (or no --train)"),
}
# chinchilla_tied's paper variants repeat chinchilla's kumar2024 and chen2025 ones: fits only.
PAPER_LAWS = tuple(name for name in PREDICTORS if name != "chinchilla_tied")
# A per-bit-width QiD fit does not record which bit width it was fitted to.
NOT_FROM_FITS = {"ouyang2024.qid_fixed_bits": "its file does not record the bit width it was fitted to"}


def _paper_variants(law, plan: Plan) -> list[str]:
    if law.name == "chen2025.qat":
        return ["W4A4"]  # --train quantizes weights and activations alike
    if law.name == "ouyang2024.qid_fixed_bits":
        return [variant for variant in law.paper_params if variant == f"{plan.post_bits}bit"]
    if law.name == "castro2025.quartet":
        return ["quartet", "separate"]  # Quartet's own scheme; the others are the methods it compares against
    return list(law.paper_params)


# The papers fitted their PTQ laws to GPTQ (Kumar et al. Table 2; Ouyang et al. Sec. 4): their constants say
# nothing of another method, whose degradation differs (Kumar et al. Figs. 10-11; Ouyang et al. Fig. 9).
PAPER_PTQ_METHOD = "gptq"
PTQ_LAWS = ("kumar2024.ptq", "kumar2024.unified", "ouyang2024.qid", "ouyang2024.qid_fixed_bits")
# Paper variants of one quantity that differ by more than this factor are named in a note, with their sources.
VARIANT_SPREAD = 1.5
# Beyond these a plan is outside every regime the laws were fitted on.
IMPLAUSIBLE_LOSS = 20.0  # nats/token: above the log of any tokenizer's vocabulary


def paper_predictions(plan: Plan) -> list[Prediction]:
    predictions = []
    for name in PAPER_LAWS:
        law = LAWS[name]
        if name in PTQ_LAWS and plan.ptq_method not in (None, PAPER_PTQ_METHOD):
            continue
        for variant in _paper_variants(law, plan):
            quantities = PREDICTORS[name].function(law, law.paper_params[variant], plan)
            for quantity, value in quantities.items():
                no_interval = "no interval: the paper reports no uncertainty"
                predictions.append(Prediction(f"paper {variant}", name, quantity, value, None, no_interval))
    return predictions


def bootstrap_params(result: Fit, resamples: int) -> list[dict[str, float]]:
    """Parameter sets re-fitted, from the fit's optimum, to its stored points resampled with replacement.

    A fit file keeps per-parameter CIs but not the bootstrap draws behind them; an interval of a prediction
    needs the draws, since the parameters move together (a power law's scale with its exponents).
    Resamples are seeded by the fit's seed and draw points one by one: the file does not record whether the
    fit's own bootstrap drew whole runs (run_col), which gives wider intervals where a run has several points.
    """
    # JSON has no infinity: Fit.to_json writes an infinite input (a tensor kept in high precision) as null.
    inputs = {name: [math.inf if v is None else v for v in values] for name, values in result.points["inputs"].items()}
    table = pd.DataFrame(inputs).assign(**{result.target: result.points["observed"]})
    rng = np.random.default_rng(result.seed)
    draws = []
    for _ in range(resamples):
        sample = table.iloc[rng.integers(0, len(table), len(table))]
        refit = fit(result.law, sample, target=result.target, starts=[result.params], bootstrap=0, group_col=None)
        draws.append(refit.params)
    return draws


def fit_predictions(path: str, plan: Plan, resamples: int | None) -> list[Prediction]:
    result = _load_fit(path)
    name = result.law.name
    if name not in PREDICTORS or name in NOT_FROM_FITS:
        reason = NOT_FROM_FITS.get(name, "no quantity here comes from it")
        usable = ", ".join(law for law in PREDICTORS if law not in NOT_FROM_FITS)
        raise ValueError(f"--fit {path}: a fit of {name} cannot be used ({reason}); usable laws: {usable}")
    predictor = PREDICTORS[name]
    point = predictor.function(result.law, result.params, plan)
    if not point:
        raise ValueError(f"--fit {path}: a fit of {name} needs {predictor.needs}")
    resamples = result.n_bootstrap if resamples is None else resamples
    if not result.points:
        method, draws = "no interval: the fit file stores no points to resample", []
    elif resamples == 0:
        method, draws = "no interval: no bootstrap (pass --resamples K)", []
    else:
        draws = [predictor.function(result.law, params, plan) for params in bootstrap_params(result, resamples)]
        refits = f"{resamples} re-fits to the {result.n_points} points resampled"
        method = f"bootstrap: {result.ci_level:.0%} percentile of {refits}"
    tail = 100 * (1 - result.ci_level) / 2
    predictions = []
    for quantity, value in point.items():
        interval = None
        if draws:
            low, high = np.percentile([draw[quantity] for draw in draws], [tail, 100 - tail])
            interval = (float(low), float(high))
        predictions.append(Prediction(f"fit {path}", name, quantity, value, interval, method))
    return predictions


def _load_fit(path: str) -> Fit:
    try:
        return load_fit(path)
    except OSError as error:
        raise ValueError(f"--fit {path}: cannot read the file ({error.strerror})") from error
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"--fit {path}: not a fit file written by Fit.to_json ({error!r})") from error


def prediction_notes(plan: Plan, predictions: list[Prediction], fits: dict[str, Fit]) -> list[str]:
    """Warnings the numbers themselves call for: paper variants that disagree, fits asked beyond their data,
    implausible plans."""
    notes = []
    by_quantity = {}
    for p in predictions:
        if p.source.startswith("paper ") and math.isfinite(p.value) and p.value > 0:
            by_quantity.setdefault((p.law, p.quantity), []).append(p)
    for (name, quantity), group in by_quantity.items():
        low, high = min(group, key=lambda p: p.value), max(group, key=lambda p: p.value)
        if high.value > VARIANT_SPREAD * low.value:
            sources = "; ".join(f"{p.source}: {_variant_source(name, p)}" for p in (low, high))
            notes.append(f"{name}: {quantity} differs {high.value / low.value:.1f}x between paper variants ({sources})")
    for path, result in fits.items():
        notes += [f"--fit {path}: {note}" for note in extrapolation_notes(result, plan)]
    if plan.D < plan.N:
        notes.append(f"D/N = {plan.D / plan.N:.2g}: fewer tokens than parameters, far below every run these laws saw")
    if any(p.quantity in (LOSS, LOSS_AFTER_PTQ) and p.value > IMPLAUSIBLE_LOSS for p in predictions):
        notes.append(f"a predicted loss exceeds {IMPLAUSIBLE_LOSS:g} nats: the plan lies outside the laws' range")
    return notes


def _variant_source(name: str, prediction: Prediction) -> str:
    return LAWS[name].paper_params[prediction.source.removeprefix("paper ")].source


def extrapolation_notes(result: Fit, plan: Plan) -> list[str]:
    """Where the plan's N or D lies beyond the range the fit saw, by how far."""
    notes = []
    for name, value in (("N", plan.N), ("D", plan.D)):
        seen = [v for v in result.points.get("inputs", {}).get(name, []) if v is not None]
        if not seen:
            continue
        low, high = min(seen), max(seen)
        if value > high or value < low:
            factor = value / high if value > high else low / value
            notes.append(
                f"{name} = {value:.3g} is {factor:.3g}x beyond the {low:.3g}-{high:.3g} the fit saw: an extrapolation"
            )
    return notes


def plan_notes(plan: Plan) -> list[str]:
    """What a reader must know to read the numbers: which precision each law was given, and what it skipped."""
    notes = []
    if plan.ptq_method not in (None, PAPER_PTQ_METHOD):
        notes.append(
            f"{', '.join(PTQ_LAWS)}: the papers fitted these to GPTQ and give no constants for {plan.ptq_method}; "
            f"pass --fit with a {plan.ptq_method} fit (the workflow writes results/fits/kumar2024/ptq_{plan.ptq_method}.json)"
        )
    bits = plan.kumar_training_bits
    if bits is None:
        notes.append("kumar2024.neff: Kumar et al.'s N_eff law is for integer training; no N_eff or its loss")
    else:
        notes.append("kumar2024: " + ", ".join(f"{name} = {value}" for name, value in bits.items()))
    if plan.post_bits is not None:
        notes.append("kumar2024.ptq: D_crit PTQ takes B and β from Table 2's Chinchilla fit (the PTQ law has neither)")
        if plan.train is not None:
            notes.append("kumar2024.ptq: δ_PTQ is for a BF16-trained model; kumar2024.unified accounts for --train")
    if plan.train is not None and plan.train.kind == "int":
        if plan.train.bits != 4:
            notes.append(
                f"chen2025.qat: paper constants are for W4A4; --train gives W{plan.train.bits}A{plan.train.bits}"
            )
        if plan.chen_group_size is None:
            notes.append(f"chen2025.qat: δ_QAT needs a group size, int<b>:g<G>; --train gives {plan.train}")
    for law, kind in efficiency2025.TRAINING_KIND.items():
        notes += filter(None, [efficiency2025.precision_note(LAWS[law], plan.train_bits(kind), plan.train)])
    if plan.train is None:
        notes.append("sun2025.capybara: bf16 read as E8M7 with B = 128, the setting the paper quotes D_crit for")
    elif plan.train.kind == "fp" and plan.sun_format is None:
        notes.append(f"sun2025.capybara: no block size for {plan.train.granularity} scaling; use b<B> or channel")
    return notes


def parse_count(option: str, text: str) -> float:
    """A positive count such as 1e9, 595M or 100B (k, M, B, T: 1e3, 1e6, 1e9, 1e12)."""
    suffix = text[-1:].lower()
    number, multiplier = (text[:-1], COUNT_SUFFIXES[suffix]) if suffix in COUNT_SUFFIXES else (text, 1.0)
    try:
        value = float(number) * multiplier
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{option}: expected a positive count such as 1e9, 595M or 100B, got {text!r}")
    return value


def parse_ptq(text: str) -> tuple[str, QuantSpec]:
    """METHOD:SPEC, e.g. gptq:int4:g128 -> (method, QuantSpec); the PTQ laws are for integer formats."""
    from qscaling.quant.ptq import METHODS  # torch: `predict` answers in a second without it until --ptq is given

    method, _, spec_text = text.partition(":")
    if method not in METHODS or not spec_text:
        raise ValueError(f"--ptq: expected METHOD:SPEC with METHOD one of {', '.join(METHODS)}, got {text!r}")
    try:
        spec = parse_spec(spec_text)
    except ValueError as error:
        raise ValueError(f"--ptq: {error}") from error
    if spec.kind != "int":
        raise ValueError(f"--ptq: the PTQ laws (Kumar et al., Ouyang et al.) are for int<b> formats, got {spec}")
    return method, spec


def parse_train(text: str) -> QuantSpec:
    """The training precision of weights and activations, e.g. int4:g128 or fp:e4m3:b128."""
    try:
        return parse_spec(text)
    except ValueError as error:
        raise ValueError(f"--train: {error}") from error


def predict(plan: Plan, fits=(), resamples: int | None = None) -> list[Prediction]:
    """Every prediction for `plan`, ordered by quantity, then papers before fits."""
    predictions = paper_predictions(plan)
    for path in fits:
        predictions += fit_predictions(path, plan, resamples)
    return sorted(predictions, key=lambda prediction: QUANTITIES.index(prediction.quantity))


def describe_plan(plan: Plan) -> str:
    ptq = f"PTQ {plan.ptq_method}:{plan.ptq}" if plan.ptq is not None else "no PTQ"
    train = f"trained in {plan.train} (weights, activations)" if plan.train is not None else "trained in 16 bits"
    return f"N = {plan.N:.4g} parameters, D = {plan.D:.4g} tokens (D/N = {plan.D / plan.N:.3g}); {train}; {ptq}"


def format_table(predictions: list[Prediction]) -> str:
    header = ("source", "quantity", "value", "interval", "law")
    rows = [
        (
            p.source,
            p.quantity,
            f"{p.value:.4g}",
            f"[{p.interval[0]:.4g}, {p.interval[1]:.4g}]" if p.interval else "no interval",
            p.law,
        )
        for p in predictions
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in [header, *rows]
    )


def _finite(value):
    return value if isinstance(value, float) and math.isfinite(value) else None


def to_json(plan: Plan, predictions: list[Prediction], notes: list[str]) -> str:
    records = []
    for prediction in predictions:
        record = asdict(prediction)
        record["value"] = _finite(prediction.value)
        record["interval"] = [_finite(bound) for bound in prediction.interval] if prediction.interval else None
        records.append(record)
    described = {
        "N": plan.N,
        "D": plan.D,
        "ptq": f"{plan.ptq_method}:{plan.ptq}" if plan.ptq is not None else None,
        "train": str(plan.train) if plan.train is not None else None,
    }
    return json.dumps({"plan": described, "predictions": records, "notes": notes}, indent=2, ensure_ascii=False)


def add_arguments(parser) -> None:
    parser.add_argument("--N", required=True, help="non-embedding parameters, e.g. 1e9 or 595M")
    parser.add_argument("--D", required=True, help="training tokens, e.g. 2e10 or 100B")
    parser.add_argument("--ptq", metavar="METHOD:SPEC", help="post-training quantization, e.g. gptq:int4:g128")
    parser.add_argument(
        "--train", metavar="SPEC", help="training precision of weights and activations: int4:g128, fp:e4m3:b128"
    )
    parser.add_argument("--fit", action="append", default=[], metavar="FILE.json", help="a fit JSON (repeatable)")
    parser.add_argument(
        "--resamples",
        type=int,
        metavar="K",
        help="bootstrap re-fits per --fit for its intervals (default: the fit's own bootstrap count; 0: none)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args) -> int:
    if args.resamples is not None and args.resamples < 0:
        raise ValueError(f"--resamples: expected a count >= 0, got {args.resamples}")
    method, ptq = parse_ptq(args.ptq) if args.ptq else (None, None)
    plan = Plan(
        N=parse_count("--N", args.N),
        D=parse_count("--D", args.D),
        ptq_method=method,
        ptq=ptq,
        train=parse_train(args.train) if args.train else None,
    )
    predictions = predict(plan, args.fit, args.resamples)
    notes = plan_notes(plan) + prediction_notes(plan, predictions, {path: _load_fit(path) for path in args.fit})
    if args.json:
        print(to_json(plan, predictions, notes))
    else:
        print(describe_plan(plan))
        print(format_table(predictions))
        for note in notes:
            print(f"note: {note}")
    return 0
