"""The training core every weight-training algorithm shares (GRPO, SFT, and later ones).

A floor below ``algorithms/`` and above ``gateway/``: it knows how to hold, save, split
and serve a trainable model, and nothing of any one algorithm's idea.

* :mod:`.policy` — :class:`~.policy.Policy`: the model trained, LoRA or full, its compute
  dtype, the reference model, token logprobs, the :class:`~agentbolt.engines.weight_update.WeightUpdate`
  it hands to the engine, export (torch).
* :mod:`.logprobs` — token logprobs at the trained positions only (the output layer runs on
  those alone), each task's shared prompt run once per micro-batch.
* :mod:`.lora` — :class:`~.lora.LoraSettings`, the LoRA a config asks for.
* :mod:`.settings` — :class:`~.settings.PolicyTrainingConfig`, the fields GRPO's and SFT's configs share.
* :mod:`.checkpoint` — ``run_dir/checkpoints/step-N``: weights, optimizer, run state (torch).
* :mod:`.distributed` — data parallelism with ``torch.distributed``, the identity without it.
* :mod:`.fsdp` — the policy sharded with FSDP2 (``sharding="fsdp"``), sharded checkpoints (DCP),
  the gathered model for export (torch).
* :mod:`.batch` — token sequences (:class:`~.batch.TokenSequence`: ids and a loss mask; a
  rollout's samples add logprobs and an advantage) padded into tensors, packed into
  micro-batches within a token budget, the prompt prefix rows share found once (torch).
* :mod:`.versions` — policy versions never reused across crashes; lag measured in updates.
* :mod:`.staleness` — which sampled tokens are too many updates behind to train on.
* :mod:`.sync` — :class:`~.sync.PolicySync`: a run's publishing, version numbering (never
  reused) and π_old decision, the same for GRPO and SFT.
* :mod:`.publish` — what is trained is what is served: publishing a policy to its engine
  (in the format the engine takes) and checking the engine's logprobs against the trainer's.
* :mod:`.run` — :class:`~.run.TrainingRun`, the run skeleton: run directory and id, resume,
  metrics, held-out evaluation before/after, the steps within a time budget, checkpoints,
  export, wall time — per policy in a run that trains several.

Nothing is imported here: ``agentbolt.training.lora`` stays importable without torch.
"""
