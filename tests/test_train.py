"""Training: schedules, determinism, bit-exact resume after kill -9, NaN handling, WSD cooldown branches."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
import yaml
from safetensors.torch import load_file

import qscaling.train as train_module
from qscaling.data import load_tokens
from qscaling.model import ModelShape, build_model
from qscaling.quant import choose_qparams, parse_spec
from qscaling.train import RunSpec, compute_loss, lr_at, milestone_name, train

SHAPE = ModelShape(d_model=32, n_layers=2, n_heads=2, d_ff=64, vocab_size=64, seq_len=32)


def tiny_spec(**overrides) -> RunSpec:
    fields = dict(
        size="Ntiny",
        shape=SHAPE,
        data="markov",
        batch_size=8,
        lr=3e-3,
        warmup_tokens=1024,
        total_tokens=25_600,
        schedule="cosine",
    )
    return RunSpec(**{**fields, **overrides})


def weights(checkpoint_dir):
    return load_file(checkpoint_dir / "model.safetensors")


def assert_same_weights(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


def test_schedules():
    cosine = tiny_spec(warmup_tokens=0, min_lr_ratio=0.1)
    assert lr_at(cosine, 0) == pytest.approx(3e-3)
    assert lr_at(cosine, cosine.total_tokens // 2) == pytest.approx(0.55 * 3e-3)
    assert lr_at(cosine, cosine.total_tokens) == pytest.approx(3e-4)
    trunk = tiny_spec(schedule="wsd")
    assert lr_at(trunk, 2048) == lr_at(trunk, 20_000) == 3e-3
    branch = tiny_spec(schedule="wsd", cooldown={"trunk": trunk.run_id, "start_tokens": 20_480})
    assert lr_at(branch, 20_480) == pytest.approx(3e-3)
    assert lr_at(branch, 23_040) == pytest.approx(0.5 * (3e-3 + 3e-4))
    assert lr_at(branch, 25_600) == pytest.approx(3e-4)


def test_spec_round_trips_and_rejects_unknown_keys():
    spec = tiny_spec()
    assert RunSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['learning_rate'\]"):
        RunSpec.from_dict({**spec.to_dict(), "learning_rate": 1.0})
    with pytest.raises(ValueError, match="schedule 'linear'"):
        tiny_spec(schedule="linear")


def test_training_is_deterministic_and_learns(tmp_path, token_files):
    spec = tiny_spec()
    first = train(spec, tmp_path / "a", token_files["train"], milestones=[spec.total_tokens], progress=False)
    second = train(spec, tmp_path / "b", token_files["train"], milestones=[spec.total_tokens], progress=False)
    final = milestone_name(spec.total_tokens)
    assert_same_weights(
        weights(tmp_path / "a" / "checkpoints" / final), weights(tmp_path / "b" / "checkpoints" / final)
    )
    curve = [loss for _, loss in first["train_loss_curve"]]
    assert curve[-1] < curve[0] - 1.0  # ln(64) = 4.16 at start; the chain has ~ln(4) bits of entropy per token
    assert first["tokens_seen"] == second["tokens_seen"] == 100 * 8 * 32


def _train_command(spec_path, token_file, out_dir):
    return [
        sys.executable,
        "-m",
        "qscaling.cli",
        "train",
        str(spec_path),
        "--data",
        str(token_file),
        "--out",
        str(out_dir),
        "--milestones",
        "51200",
        "--threads",
        "1",
        "--state-every",
        "10",
    ]


def test_kill_and_resume_gives_bit_identical_weights(tmp_path, token_files):
    spec = tiny_spec(total_tokens=51_200, dropout=0.1)  # dropout: the RNG state must survive the restart too
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(spec.to_dict()))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        _train_command(spec_path, token_files["train"], tmp_path / "reference"),
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )

    interrupted = subprocess.Popen(
        _train_command(spec_path, token_files["train"], tmp_path / "resumed"),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = tmp_path / "resumed" / "state.pt"
    deadline = time.monotonic() + 120
    while not state.exists() and time.monotonic() < deadline and interrupted.poll() is None:
        time.sleep(0.01)
    interrupted.send_signal(signal.SIGKILL)
    assert interrupted.wait() == -signal.SIGKILL, "the run finished before it could be killed"
    killed_at = torch.load(state, weights_only=True)["step"]
    assert 0 < killed_at < spec.total_steps
    assert not (tmp_path / "resumed" / "run.json").exists()

    subprocess.run(
        _train_command(spec_path, token_files["train"], tmp_path / "resumed"),
        check=True,
        env=env,
        capture_output=True,
        timeout=300,
    )
    final = milestone_name(51_200)
    assert_same_weights(
        weights(tmp_path / "reference" / "checkpoints" / final), weights(tmp_path / "resumed" / "checkpoints" / final)
    )


def poison_loss_at_call(monkeypatch, call: int) -> None:
    real_loss = train_module.compute_loss
    calls = {"n": 0}

    def poisoned(model, batch):
        calls["n"] += 1
        loss = real_loss(model, batch)
        return loss * float("nan") if calls["n"] == call else loss

    monkeypatch.setattr(train_module, "compute_loss", poisoned)


def test_a_non_finite_loss_stops_the_run_and_records_it_as_diverged(tmp_path, token_files, monkeypatch):
    poison_loss_at_call(monkeypatch, 6)
    spec = tiny_spec()
    summary = train(spec, tmp_path, token_files["train"], milestones=[1024, 2560, spec.total_tokens], progress=False)
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert recorded == summary and summary["run_id"] == spec.run_id
    assert summary["diverged"]["step"] == 5 and summary["diverged"]["tokens_seen"] == 1280
    assert summary["diverged"]["reason"] == "training loss is nan at step 5 (1280 tokens)"
    # The checkpoint written before the divergence stays; none after it is claimed.
    assert summary["checkpoints"] == {"1024": f"checkpoints/{milestone_name(1024)}"}
    assert [path.name for path in (tmp_path / "checkpoints").iterdir()] == [milestone_name(1024)]


def test_a_branch_of_a_trunk_that_diverged_before_its_start_is_recorded_as_diverged(tmp_path, token_files, monkeypatch):
    poison_loss_at_call(monkeypatch, 6)
    trunk = tiny_spec(schedule="wsd")
    train(trunk, tmp_path / "trunk", token_files["train"], branch_points=[20_480], progress=False)
    branch = tiny_spec(schedule="wsd", cooldown={"trunk": trunk.run_id, "start_tokens": 20_480})
    summary = train(branch, tmp_path / "branch", token_files["train"], trunk_dir=tmp_path / "trunk", progress=False)
    assert summary["diverged"]["trunk"] == trunk.run_id and summary["checkpoints"] == {}
    assert summary["diverged"]["reason"].startswith(f"its trunk {trunk.run_id} diverged: training loss is nan")


def test_wsd_cooldown_branch_starts_from_the_trunk_state(tmp_path, token_files):
    trunk = tiny_spec(schedule="wsd")
    train(trunk, tmp_path / "trunk", token_files["train"], milestones=[20_480], branch_points=[20_480], progress=False)
    branch_state = tmp_path / "trunk" / "branches" / f"{milestone_name(20_480)}.pt"
    assert torch.load(branch_state, weights_only=True)["step"] == 80
    branch = tiny_spec(schedule="wsd", cooldown={"trunk": trunk.run_id, "start_tokens": 20_480})
    assert branch.run_id != trunk.run_id
    with pytest.raises(ValueError, match="a branch needs the directory of Ntiny-"):
        train(branch, tmp_path / "orphan", token_files["train"], progress=False)
    summary = train(
        branch,
        tmp_path / "branch",
        token_files["train"],
        milestones=[25_600],
        trunk_dir=tmp_path / "trunk",
        progress=False,
    )
    assert summary["steps"] == 100
    assert len(summary["train_loss_curve"]) == 100  # the trunk's 80 losses carried over + 20 cooldown steps
    trunk_weights = weights(tmp_path / "trunk" / "checkpoints" / milestone_name(20_480))
    branch_weights = weights(tmp_path / "branch" / "checkpoints" / milestone_name(25_600))
    assert any(not torch.equal(trunk_weights[k], branch_weights[k]) for k in trunk_weights)


def test_a_longer_trunk_extends_the_same_run_bit_exactly(tmp_path, token_files):
    short, long = tiny_spec(schedule="wsd", total_tokens=12_800), tiny_spec(schedule="wsd", total_tokens=25_600)
    assert short.run_id == long.run_id  # a trunk's length is not part of its identity
    assert tiny_spec(total_tokens=12_800).run_id != tiny_spec(total_tokens=25_600).run_id  # a cosine run's is
    train(short, tmp_path / "extended", token_files["train"], milestones=[12_800], progress=False)
    summary = train(long, tmp_path / "extended", token_files["train"], milestones=[12_800, 25_600], progress=False)
    assert summary["steps"] == 100
    train(long, tmp_path / "direct", token_files["train"], milestones=[12_800, 25_600], progress=False)
    for tokens in (12_800, 25_600):
        assert_same_weights(
            weights(tmp_path / "extended" / "checkpoints" / milestone_name(tokens)),
            weights(tmp_path / "direct" / "checkpoints" / milestone_name(tokens)),
        )


def test_milestones_that_round_to_the_same_step_each_get_a_checkpoint(tmp_path, token_files):
    spec = tiny_spec(total_tokens=5120)  # 256 tokens per step: 1000 and 1024 both end at step 4
    summary = train(spec, tmp_path, token_files["train"], milestones=[1000, 1024, 5120], progress=False)
    assert sorted(summary["checkpoints"]) == ["1000", "1024", "5120"]
    assert_same_weights(
        weights(tmp_path / "checkpoints" / milestone_name(1000)),
        weights(tmp_path / "checkpoints" / milestone_name(1024)),
    )


def test_a_milestone_asked_for_after_the_run_retrains_it_identically(tmp_path, token_files):
    spec = tiny_spec(total_tokens=5120)
    train(spec, tmp_path, token_files["train"], milestones=[5120], progress=False)
    first = weights(tmp_path / "checkpoints" / milestone_name(5120))
    summary = train(spec, tmp_path, token_files["train"], milestones=[2560, 5120], progress=False)
    assert sorted(summary["checkpoints"]) == ["2560", "5120"]
    assert (tmp_path / "checkpoints" / milestone_name(2560) / "model.safetensors").is_file()
    assert_same_weights(first, weights(tmp_path / "checkpoints" / milestone_name(5120)))


@pytest.mark.parametrize("chunk", [7, 512, 10_000])
def test_chunked_head_loss_matches_materialised_logits(chunk):
    """The chunked loss and its gradients equal cross-entropy over the full logits, whatever the chunking."""
    torch.manual_seed(0)
    model = build_model(SHAPE, seed=3)
    batch = torch.randint(0, SHAPE.vocab_size, (5, SHAPE.seq_len + 1))
    loss = compute_loss(model, batch, chunk=chunk)
    loss.backward()
    chunked = {name: p.grad.clone() for name, p in model.named_parameters()}
    model.zero_grad()
    logits = model(input_ids=batch[:, :-1]).logits
    reference = torch.nn.functional.cross_entropy(logits.reshape(-1, SHAPE.vocab_size), batch[:, 1:].reshape(-1))
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=1e-6, atol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(chunked[name], p.grad, rtol=1e-4, atol=1e-7, msg=name)


def test_a_run_started_from_another_runs_state_goes_on_from_there_under_its_own_spec(tmp_path, token_files):
    """A quantized-training run branched from its fp32 partner's trunk after warmup: the partner's first steps,
    weights and optimizer are its own; from there it trains with its own precision and schedule."""
    trunk = tiny_spec(schedule="wsd")
    train(trunk, tmp_path / "trunk", token_files["train"], branch_points=[2_048], progress=False)
    start = {"run": trunk.run_id, "tokens": 2_048}
    branched = tiny_spec(schedule="wsd", start_from=start, training_precision={"weights": "int4:g8"})
    assert branched.source == trunk.run_id and branched.start_tokens == 2_048
    assert branched.run_id != tiny_spec(schedule="wsd", training_precision={"weights": "int4:g8"}).run_id
    summary = train(
        branched, tmp_path / "branched", token_files["train"], milestones=[25_600], trunk_dir=tmp_path / "trunk",
        progress=False,
    )  # fmt: skip
    trunk_curve = json.loads((tmp_path / "trunk" / "run.json").read_text())["train_loss_curve"]
    assert summary["train_loss_curve"][:8] == trunk_curve[:8]  # the trunk's 8 steps, carried over
    assert summary["train_loss_curve"][8] != trunk_curve[8]  # then the run's own precision
    assert summary["steps"] == 100
    learned = tiny_spec(
        schedule="wsd", start_from=start, training_precision={"weights": "int4:g8", "quantizer": {"weights": "lsq"}}
    )
    summary = train(learned, tmp_path / "learned", token_files["train"], milestones=[25_600],
                    trunk_dir=tmp_path / "trunk", progress=False)  # fmt: skip
    assert summary["train_loss_curve"][:8] == trunk_curve[:8] and summary["steps"] == 100
    trained = weights(tmp_path / "learned" / "checkpoints" / milestone_name(25_600))
    assert any(name.endswith("weight_step") for name in trained)  # learned from a fresh start at the branch point


def test_a_learned_quantizer_of_a_started_run_starts_from_the_weights_it_takes(token_files):
    trunk = tiny_spec(schedule="wsd")
    fresh = train_module._Training.start(trunk, torch.device("cpu"))
    for _ in range(3):
        batch = train_module.batch_at(load_tokens(token_files["train"]), trunk, fresh.step)
        train_module.training_step(fresh.model, fresh.optimizer, fresh.scaler, batch, trunk)
        fresh.step += 1
    fresh.losses = [1.0, 2.0, 3.0]
    start = {"run": trunk.run_id, "tokens": 3 * trunk.tokens_per_step}
    spec = tiny_spec(
        schedule="wsd", start_from=start, training_precision={"weights": "int4:g8", "quantizer": {"weights": "lsq"}}
    )
    started = train_module._Training.start(spec, torch.device("cpu"))
    started.adopt(fresh.state())
    source = dict(fresh.model.named_parameters())
    for name, parameter in started.model.named_parameters():
        if name.endswith("weight_step"):
            linear = name.rsplit(".", 1)[0]
            expected = choose_qparams(source[f"{linear}.weight"].detach(), parse_spec("int4:g8")).scale
            assert torch.equal(parameter.detach(), expected), name
            assert parameter not in started.optimizer.state or not started.optimizer.state[parameter]
        else:
            assert torch.equal(parameter, source[name]), name
            assert torch.equal(
                started.optimizer.state[parameter]["exp_avg"], fresh.optimizer.state[source[name]]["exp_avg"]
            )
    assert started.step == 3 and started.losses == [1.0, 2.0, 3.0]


def test_a_spec_without_start_from_keeps_its_identity_and_a_bad_one_is_refused():
    spec = tiny_spec()
    assert "start_from" not in spec.to_dict() and RunSpec.from_dict(spec.to_dict()) == spec
    started = tiny_spec(start_from={"run": "Ntiny-0123456789", "tokens": 1024})
    assert RunSpec.from_dict(started.to_dict()) == started
    with pytest.raises(ValueError, match=r"start_from.tokens=25600 must lie inside"):
        tiny_spec(start_from={"run": "Ntiny-0123456789", "tokens": 25_600})
    with pytest.raises(ValueError, match="needs exactly 'run' and 'tokens'"):
        tiny_spec(start_from={"run": "Ntiny-0123456789"})
    with pytest.raises(ValueError, match="cannot also have start_from"):
        tiny_spec(
            schedule="wsd",
            cooldown={"trunk": "Ntiny-0123456789", "start_tokens": 1024},
            start_from={"run": "Ntiny-0123456789", "tokens": 1024},
        )
