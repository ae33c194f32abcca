"""The SFT optimisation loop: epochs over the samples, AdamW, clipping, warmup and decay.

One call of :meth:`SFTUpdate.run` trains on one iteration's samples, from the policy's
current weights, with a fresh optimizer and learning-rate schedule:

1. each epoch shuffles the samples (seeded by ``seed`` and the epoch) and cuts them into
   optimizer batches of ``batch_size`` records;
2. each batch is split into micro-batches of at most ``micro_batch_tokens`` padded tokens
   (a longer record goes alone); per micro-batch the summed NLL of its assistant tokens
   is divided by N, the number of assistant tokens of the **whole batch**, and
   back-propagated — so the accumulated gradient is that of the batch's
   **per-token mean NLL** (every assistant token weighs the same, long answers weigh more
   than short ones). Batching is the training core's (:mod:`agentbolt.training.batch`:
   each record a unit of :func:`~agentbolt.training.batch.pack`, padded by
   :func:`~agentbolt.training.batch.pad`); the tokens the rows of a micro-batch start
   with (an agent's system prompt and few-shot turns; one prefix per group of rows when
   they hold several agents' prompts) go through the model once;
3. clip the global gradient norm, set the learning rate, step AdamW.

A sharded policy (``sharding="fsdp"``): every rank runs the whole batch on its shards
with the loss divided by the ranks too, and FSDP's reduce-scatter sums the gradients.

Learning rate at optimizer step s of S (W = ceil(warmup_ratio · S) warmup steps):
``lr · (s+1)/W`` while s < W, then ``lr · f(p)`` with p = (s − W)/(S − W) ∈ [0, 1) and
f = ½(1 + cos πp) (cosine), 1 − p (linear) or 1 (constant).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from agentbolt.algorithms.sft.chat_data import IGNORE_INDEX, ChatSample
from agentbolt.algorithms.sft.config import SFTConfig
from agentbolt.training import distributed as dist
from agentbolt.training import fsdp
from agentbolt.training.batch import pack, pad
from agentbolt.training.logprobs import prefixed_hidden, split_head
from agentbolt.training.policy import Policy, prefix_sharing_ok

__all__ = ["SFTStats", "SFTUpdate", "assistant_nll", "learning_rate_at"]

StepCallback = Callable[[int, int, float, float], None]
"""``(optimizer step done, total steps, batch loss, learning rate)``."""


@dataclass(frozen=True, slots=True)
class SFTStats:
    """What one iteration's training did."""

    loss: float
    """Per-token mean NLL of the assistant tokens over the last epoch."""
    first_epoch_loss: float
    records: int
    optimizer_steps: int
    trained_tokens: int
    """Assistant tokens per epoch."""
    tokens: int
    """All tokens (context too) per epoch."""
    grad_norm: float
    """Before clipping, at the last optimizer step."""
    learning_rate: float
    """Peak learning rate."""
    epochs: int
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        """All tokens processed (every epoch) per second of training."""
        return self.tokens * self.epochs / self.seconds if self.seconds > 0 else 0.0

    def as_metrics(self, prefix: str = "train/") -> dict[str, float | int]:
        out: dict[str, float | int] = {f"{prefix}{k}": v for k, v in asdict(self).items()}
        out[f"{prefix}tokens_per_second"] = self.tokens_per_second
        return out


def learning_rate_at(step: int, total: int, peak: float, warmup_ratio: float, schedule: str) -> float:
    """The learning rate of optimizer step ``step`` (0-based) of ``total`` (see the module doc)."""
    warmup = math.ceil(warmup_ratio * total)
    if step < warmup:
        return peak * (step + 1) / warmup
    if schedule == "constant":
        return peak
    p = (step - warmup) / max(1, total - warmup)
    return peak * (0.5 * (1.0 + math.cos(math.pi * p)) if schedule == "cosine" else 1.0 - p)


def assistant_nll(model: Any, input_ids: Tensor, attention_mask: Tensor, labels: Tensor, *,
                  shared_prefix: int = 0, prefix_group: Tensor | None = None) -> tuple[Tensor, int]:
    """Summed NLL of the labelled tokens (``labels != -100``) given the tokens before them, and their count.

    Only the labelled positions go through the output layer (a chat record trains a few
    dozen of its hundreds of tokens, and a 49k-token vocabulary makes full logits the
    biggest tensor of the step); models whose logits are more than ``lm_head(hidden)``
    (soft-capped or scaled) take the full-logits path.

    ``shared_prefix`` = P > 0: the first P tokens are the same in every row and none of
    the tokens up to P is labelled (the system prompt and few-shot turns all records of
    an agent start with). They go through the model once and their keys/values are
    shared by every row — exact: the gradient of the shared part is the sum over rows.
    ``prefix_group`` (``[N]``): rows of one group share their first P tokens, rows of
    different groups need not (:func:`~agentbolt.training.batch.prefix_groups`).
    Not under gradient checkpointing, which turns the cache off: then the rows run whole."""
    split = split_head(model)
    if split is None:
        targets = labels[:, 1:]
        mask = targets != IGNORE_INDEX
        logits = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        return F.cross_entropy(logits[:, :-1][mask].float(), targets[mask], reduction="sum"), int(mask.sum())
    backbone, head = split
    P = shared_prefix if input_ids.shape[0] > 1 and prefix_sharing_ok(backbone) else 0
    if P > 0:  # positions P..T-1
        hidden = prefixed_hidden(backbone, input_ids, attention_mask, P, prefix_group)
    else:
        hidden = backbone(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state
    targets = labels[:, P + 1 :]  # hidden state at position t predicts token t + 1
    mask = targets != IGNORE_INDEX
    logits = head(hidden[:, :-1][mask]).float()
    return F.cross_entropy(logits, targets[mask], reduction="sum"), int(mask.sum())


class SFTUpdate:
    """Trains ``policy`` on chat samples (see the module doc)."""

    def __init__(self, policy: Policy, config: SFTConfig) -> None:
        if not policy.trainable_parameters():
            raise ValueError("the policy has no trainable parameters")
        self.policy = policy
        self.config = config

    def optimizer_steps(self, n_samples: int) -> int:
        return self.config.epochs * math.ceil(n_samples / self.config.batch_size)

    def run(self, samples: Sequence[ChatSample], *, iteration: int = 1,
            on_step: StepCallback | None = None) -> SFTStats:
        cfg, policy = self.config, self.policy
        if not samples:
            raise ValueError("no sample to train on")
        t0 = time.perf_counter()
        params = policy.trainable_parameters()
        optimizer = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay,
                                      betas=cfg.adam_betas)
        total = self.optimizer_steps(len(samples))
        step, grad_norm = 0, 0.0
        epoch_losses: list[float] = []
        policy.model.train()
        for epoch in range(cfg.epochs):
            order = list(samples)
            random.Random(f"{cfg.seed}-{iteration}-{epoch}").shuffle(order)
            nll_sum, n_sum = 0.0, 0
            for b in range(0, len(order), cfg.batch_size):
                batch = order[b : b + cfg.batch_size]
                N = sum(s.num_trained for s in batch)
                # sharded: every rank runs the whole batch and FSDP sums the ranks' gradients
                norm = N * (dist.world_size() if policy.sharded else 1)
                optimizer.zero_grad(set_to_none=True)
                batch_nll = 0.0
                for mb in pack([[s] for s in batch], cfg.micro_batch_tokens):
                    rows = pad(mb, policy.pad_id).to(policy.device)
                    with policy.autocast():
                        nll, _ = assistant_nll(policy.model, rows.input_ids, rows.attention_mask,
                                               rows.labels(IGNORE_INDEX), shared_prefix=rows.shared_prefix,
                                               prefix_group=rows.prefix_group)
                    (nll / norm).backward()
                    batch_nll += float(nll.detach())
                if policy.sharded:
                    grad_norm = fsdp.grad_norm(params, cfg.max_grad_norm)
                elif cfg.max_grad_norm is not None:
                    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm))
                else:
                    squares = ((p.grad.float() ** 2).sum() for p in params if p.grad is not None)
                    grad_norm = float(torch.sqrt(sum(squares, torch.zeros(()))))
                lr = learning_rate_at(step, total, cfg.learning_rate, cfg.warmup_ratio, cfg.lr_schedule)
                for group in optimizer.param_groups:
                    group["lr"] = lr
                optimizer.step()
                step += 1
                nll_sum, n_sum = nll_sum + batch_nll, n_sum + N
                if on_step is not None:
                    on_step(step, total, batch_nll / N, lr)
            epoch_losses.append(nll_sum / n_sum)
        optimizer.zero_grad(set_to_none=True)
        policy.model.eval()
        return SFTStats(
            loss=epoch_losses[-1], first_epoch_loss=epoch_losses[0], records=len(samples), optimizer_steps=step,
            trained_tokens=sum(s.num_trained for s in samples), tokens=sum(len(s) for s in samples),
            grad_norm=grad_norm, learning_rate=cfg.learning_rate, epochs=cfg.epochs, seconds=time.perf_counter() - t0,
        )
