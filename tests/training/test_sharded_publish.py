"""What the publisher of a sharded policy does with the gathered weights, in one process
(the gathers themselves run across ranks in ``test_fsdp_fit.py``):

* an update in parts draws every part even when the engine refuses one — the other ranks
  gather them all, so rank 0 must too — and raises the engine's error after;
* base weights go in parts of bounded size, each weight once, in the engine's dtype;
* a gathered LoRA is written as the directory ``save_pretrained`` writes (what vLLM reads).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
peft = pytest.importorskip("peft")

from agentbolt.engines.local.weights import lora_from, read_lora_dir  # noqa: E402
from agentbolt.engines.transformers_engine import TransformersEngine  # noqa: E402
from agentbolt.gateway import Gateway, GatewayConfig, LocalGatewayControl  # noqa: E402
from agentbolt.models import tiny_model  # noqa: E402
from agentbolt.training import sharded_publish  # noqa: E402
from agentbolt.training.sharded_publish import base_parts, stream_parts, write_lora  # noqa: E402


async def test_every_part_is_drawn_even_when_the_engine_refuses_one() -> None:
    model, tokenizer = tiny_model(seed=0)
    engine = TransformersEngine(model, tokenizer, num_threads=1)
    control = LocalGatewayControl(Gateway(engine, GatewayConfig()))
    new = tiny_model(seed=1)[0].state_dict()
    drawn: list[int] = []

    def parts() -> Iterator[dict[str, Any]]:
        for i, part in enumerate([{"model.norm.weight": new["model.norm.weight"]}, {"not.a.weight": torch.zeros(1)},
                                  {"model.embed_tokens.weight": new["model.embed_tokens.weight"]}]):
            drawn.append(i)  # a gather every rank makes
            yield part

    try:
        with pytest.raises(ValueError, match="keys the served model does not have"):
            await stream_parts(control, parts(), 3)
        assert drawn == [0, 1, 2]
        assert engine.incomplete_weights and engine.policy_version == 0
    finally:
        await engine.close()


def test_base_weights_go_in_parts_of_bounded_size(monkeypatch: pytest.MonkeyPatch) -> None:
    model, _ = tiny_model(seed=0, vocab="bytes", hidden=32)
    monkeypatch.setattr(sharded_publish, "BASE_PART_BYTES", 8192)
    named = list(model.named_parameters())
    parts = list(base_parts(iter(named), torch.bfloat16))
    assert len(parts) > 2
    seen = [name for part in parts for name in part]
    assert seen == [name for name, _ in named]
    for part in parts:
        sizes = [t.numel() * t.element_size() for t in part.values()]
        assert sum(sizes[:-1]) < 8192  # a part closes once it reaches the bound
        assert all(t.dtype == torch.bfloat16 for t in part.values())
    weights = dict(named)
    for part in parts:
        for name, t in part.items():
            assert torch.equal(t, weights[name].detach().to(torch.bfloat16)), name


def test_a_gathered_lora_is_written_as_save_pretrained_writes_it(tmp_path: Path) -> None:
    base, _ = tiny_model(seed=0)
    with torch.random.fork_rng():  # the LoRA's initialisation: later tests see the same random state
        lora = peft.get_peft_model(base, peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "lora_B" in name:
                p.normal_(generator=torch.Generator().manual_seed(len(name)))
    state, scale = lora_from(lora, None)
    write_lora(tmp_path / "written", lora, state)
    lora.save_pretrained(tmp_path / "saved")
    (got, got_scale), (want, want_scale) = read_lora_dir(tmp_path / "written"), read_lora_dir(tmp_path / "saved")
    assert got.keys() == want.keys() and got_scale == want_scale == scale == 2.0
    for key, value in want.items():
        assert torch.equal(got[key], value), key
    written, saved = (json.loads((tmp_path / d / "adapter_config.json").read_text()) for d in ("written", "saved"))
    written.pop("auto_mapping"), saved.pop("auto_mapping")  # peft notes the base model class on save; unused to load
    assert written == saved
