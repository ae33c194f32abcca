"""``Trainer.fit`` trains a policy sharded by FSDP2 across ranks (gloo, 2 CPU processes)
with the same GRPO (and SFT) loop as one process, and the engine serves what one process trains.

Rank 0 samples, publishes, checkpoints and exports; rank 1 follows and joins every
gather (:mod:`agentbolt.training.ranks`). :mod:`training.fsdp_fit_worker` runs 3 steps
(all weights trained), then continues the run to step 4 on 2 ranks and, from a copy of
its directory, in one process:

* every publish is an update in parts — one per FSDP group — committed once, and the
  train = serve probe follows it; the engine serves exactly the gathered policy;
* the served weights equal the one-process update of the same samples within Adam's
  amplification of reordered sums' rounding (the FSDP update test's bound);
* the sharded checkpoint resumes on 2 ranks and in one process: the engine is given the
  checkpoint's weights exactly, and the next update is the uninterrupted one's (optimizer
  state included);
* a sharded LoRA is gathered whole and served as one update (every rank starts from rank 0's);
* SFT takes the same path: one iteration on chat records serves the one-process step;
* publishing a bigger sharded policy costs rank 0 one group's bytes, not a model's, and
  goes to an engine in a server as well (the update in parts over HTTP).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from algorithms.grpo.test_distributed import adam_atol  # noqa: E402
from torchrun import torchrun  # noqa: E402

from agentbolt.training.policy import Policy  # noqa: E402
from training import fsdp_fit_worker, fsdp_worker  # noqa: E402

WORKER = Path(fsdp_fit_worker.__file__)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # several 2-process runs each: minutes on a busy CPU

PROBE_TOLERANCE = 1e-3
"""The probe's tolerance for a float32 trainer and engine on one device (GRPOConfig's
``publish_tolerance``): a publish that served other weights would have raised."""


def _torchrun(mode: str, out: Path, run_dir: Path, **env: str) -> list[dict[str, Any]]:
    out.mkdir(parents=True, exist_ok=True)
    torchrun(WORKER, mode, str(out), str(run_dir), timeout=600, env=env)
    return [torch.load(out / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("fit")
    fit = _torchrun("fit3", root / "fit", root / "run")
    shutil.copytree(root / "run", root / "run-one")  # before the 2-rank resume moves the run on
    resumed = _torchrun("fit4", root / "resumed", root / "run")
    threads = torch.get_num_threads()
    with torch.random.fork_rng():
        one = fsdp_fit_worker.fit(root / "one", 0, root / "run-one", 4)
    torch.set_num_threads(threads)
    return {"root": root, "fit": fit, "resumed": resumed, "one": one}


def replay(updates: list[dict[str, Any]]) -> tuple[dict[str, torch.Tensor], list[dict[str, Any]]]:
    """The one-process run of the same updates: the policy's weights after them, and each
    update's gradient (for the tolerance)."""
    threads = torch.get_num_threads()
    with torch.random.fork_rng():
        policy = Policy(*fsdp_fit_worker.model(), lora=None)
        update, grads = fsdp_worker.make_update(policy, fsdp_fit_worker.config(Path("unused"), 4))
        steps = []
        for u in updates:
            stats = update.step(u["samples"], current_version=u["version"])
            steps.append({"grads": grads[-1], "tokens": stats.num_trained_tokens, "lr": update.config.learning_rate,
                          "adam_eps": update.optimizer.defaults["eps"]})
    torch.set_num_threads(threads)
    return fsdp_worker.params(policy), steps


def assert_served(served: dict[str, torch.Tensor], updates: list[dict[str, Any]]) -> None:
    """``served`` is the one-process result of ``updates`` within Adam's amplified rounding."""
    want, steps = replay(updates)
    for name, value in want.items():
        torch.testing.assert_close(served[name], value, rtol=0, atol=adam_atol(steps, name), msg=name)
    start = fsdp_worker.params(Policy(*fsdp_fit_worker.model(), lora=None))
    moved = [n for n in want if float((want[n] - start[n]).abs().max()) > 1e-3]
    assert len(moved) >= len(want) // 2  # the updates did something: matching is not trivial


def test_trainer_fit_trains_a_sharded_policy_and_serves_what_one_process_trains(runs: dict[str, Any]) -> None:
    lead, follower = runs["fit"]
    assert lead["steps"] == 3 and lead["policy_version"] == lead["served_version"] == 3
    assert [u["version"] for u in lead["updates"]] == [0, 1, 2]
    # every publish: one part per FSDP group (the embeddings and final norm, each block), then one commit;
    # the engine kept serving the old version until the commit
    publishes = _publishes(lead["loads"])
    assert [version for version, _ in publishes] == [1, 2, 3]
    for version, parts in publishes:
        assert [sorted({k.split(".")[2] if ".layers." in k else "rest" for k in keys}) for _, keys in parts] == \
            [["rest"], ["0"], ["1"]]
        assert {served for served, _ in parts} == {version - 1}
    for values in lead["history"]:  # the train = serve probe after each publish
        assert values["publish/max_abs_logprob_diff"] <= PROBE_TOLERANCE
    for name, value in lead["params"].items():  # the engine serves the gathered policy, bit for bit
        assert torch.equal(lead["served"][name], value), name
        assert torch.equal(follower["params"][name], value), name
    assert_served(lead["served"], lead["updates"])
    assert "model.safetensors" in lead["export"]


def test_its_sharded_checkpoint_resumes_on_two_ranks_and_in_one_process(runs: dict[str, Any]) -> None:
    fit = runs["fit"][0]
    step = runs["root"] / "run-one" / "checkpoints" / "step-000003"
    assert (step / "shards").is_dir() and not (step / "trainable.safetensors").exists()
    for lead in (runs["resumed"][0], runs["one"]):
        assert lead["steps"] == 4 and len(lead["history"]) == 1
        (first,) = lead["updates"]
        # the engine was given the checkpoint's weights, under the checkpoint's version (nothing was
        # published after it), and training went on from there
        for name, value in fit["served"].items():
            assert torch.equal(first["served"][name], value), name
        assert first["version"] == 3 and lead["policy_version"] == lead["served_version"] == 4
        assert lead["history"][0]["publish/max_abs_logprob_diff"] <= PROBE_TOLERANCE
        assert_served(lead["served"], fit["updates"] + [first])  # the optimizer's state came back too
    assert [kind for kind, _ in runs["one"]["loads"]] == ["whole", "whole"]  # one process: nothing sharded
    assert {kind for kind, _ in runs["resumed"][0]["loads"]} == {"part", "commit"}


def test_a_sharded_lora_is_gathered_and_served_whole(tmp_path: Path) -> None:
    lead, follower = _torchrun("lora", tmp_path / "out", tmp_path / "run")
    assert lead["steps"] == 2 and [kind for kind, _ in lead["loads"]] == ["whole", "whole"]
    assert all(values["publish/max_abs_logprob_diff"] <= PROBE_TOLERANCE for values in lead["history"])
    params = lead["params"]
    for name, value in params.items():  # rank 1 started from rank 0's LoRA, though it drew another
        assert torch.equal(follower["params"][name], value), name
    scale = fsdp_worker.LORA.alpha / fsdp_worker.LORA.r
    merged = 0
    for name, served in lead["served"].items():  # the engine serves W + s·B·A of the gathered policy
        module = "base_model.model." + name.removesuffix(".weight")
        a, b = params.get(f"{module}.lora_A.default.weight"), params.get(f"{module}.lora_B.default.weight")
        base = params.get(f"{module}.base_layer.weight", params.get(f"base_model.model.{name}"))
        if a is None:
            assert base is None or torch.equal(served, base), name
            continue
        assert float(b.abs().max()) > 0  # it trained
        want = base + scale * b @ a
        torch.testing.assert_close(served, want, rtol=0, atol=8 * torch.finfo(torch.float32).eps
                                   * float(want.abs().max()), msg=name)
        merged += 1
    assert merged == 2 * len(fsdp_worker.LORA.target_modules)


def test_sft_under_trainer_fit_shards_and_serves_the_one_process_step(tmp_path: Path) -> None:
    lead, follower = _torchrun("sft", tmp_path / "out", tmp_path / "run")
    threads = torch.get_num_threads()
    with torch.random.fork_rng():
        single = fsdp_worker.run_sft()  # the same records, config and weights, in one process
    torch.set_num_threads(threads)
    assert [len(parts) for _, parts in _publishes(lead["loads"])] == [3] and lead["policy_version"] == 1
    assert lead["history"][0]["publish/max_abs_logprob_diff"] <= PROBE_TOLERANCE
    assert "shards" in lead["checkpoints"]
    for name, value in single["params"].items():
        assert torch.equal(lead["served"][name], lead["params"][name]), name
        assert torch.equal(follower["params"][name], lead["params"][name]), name
        torch.testing.assert_close(lead["served"][name], value, rtol=0, atol=adam_atol(single["steps"], name),
                                   msg=name)


def test_a_publish_in_parts_costs_rank_zero_one_group_not_a_model(tmp_path: Path) -> None:
    # every freed buffer goes back to the system at once, so the peak resident size is what was held
    lead, _ = _torchrun("publish", tmp_path, tmp_path, MALLOC_MMAP_THRESHOLD_="65536")
    model, streamed, one_piece = lead["model_bytes"], lead["streamed"], lead["one_piece"]
    publishes = _publishes(lead["loads"][:-1])
    assert [(version, len(parts)) for version, parts in publishes] == [(1, 9), (2, 9)]  # the rest, and 8 blocks
    assert lead["version"] == 1 and lead["probe"] <= PROBE_TOLERANCE
    assert lead["remote_version"] == 2 and lead["remote_probe"] <= PROBE_TOLERANCE  # to a server, over HTTP
    print(f"model {model / 2**20:.1f} MiB; rank 0's peak extra while publishing in parts {streamed / 2**20:.1f} MiB "
          f"({streamed / model:.2f}x), in one piece (unsharded) {one_piece / 2**20:.1f} MiB ({one_piece / model:.2f}x)")
    block = model / 8  # about (the embeddings are 1 % of the model)
    assert streamed < 2 * block  # one part at a time: measured 0.16-0.19x the model (a block, a weight being gathered)
    assert one_piece >= model  # the measure sees a whole copy when there is one


def _publishes(loads: list[tuple[str, Any]]) -> list[tuple[int, list[Any]]]:
    """The engine's loads as (version committed, its parts)."""
    out, parts = [], []
    for kind, what in loads:
        if kind == "part":
            parts.append(what)
        elif kind == "commit":
            out.append((what, parts))
            parts = []
    return out
