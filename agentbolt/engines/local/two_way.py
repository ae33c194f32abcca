"""The one-row decode step split across two threads, each owning half of every layer.

Why: at one row a decode step is reading the weights, and one thread reads them at one
core's share of the memory bus; llama.cpp splits every product across its threads. A
thread pool per product (OpenMP, MKL) pays a barrier at every parallel region, ~10 per
layer. Here the split is by the layer's own structure (two-way tensor parallelism), so a
layer needs two meeting points:

* attention: each thread owns a group of KV heads (the first ``ceil(kv_heads / 2)``, the
  rest) with their query heads — its columns of q/k/v, its rotary product, its K/V
  written to the cache, its SDPA, and its input rows of ``o_proj``, giving a partial
  output; the two partials and the residual are summed (meeting point 1);
* MLP: each thread owns a share of the intermediate columns (half, less the extra
  attention weights of thread 0 when the KV heads are odd: both read as many bytes) —
  its gate/up columns, the activation, its input rows of ``down_proj``, a partial
  output; summed (meeting point 2);
* RMSNorm runs on both threads on the same summed row (the same ops on the same values:
  both threads hold the same hidden row); the output head is split by vocabulary.

The other thread is a persistent worker that runs its torch ops on one intra-op thread
(the engine's thread does too, during this step); torch releases the GIL inside its ops,
so the two threads stream memory in parallel. A meeting point is a pair of locks handed
across (blocking, no spinning: on a busy machine a spinning partner would take the core
the other needs). The weight halves are copies laid out like :mod:`.packed_linear` 's
(q/k/v and gate/up transposed; ``o_proj``, ``down_proj`` and the output head views),
remade when a weight changes (its version counter or storage moved: weight swaps and
LoRA merges write in place).

The math is :class:`.one_row.OneRowStep` 's with two partial sums per layer added in a
fixed order: logits agree with a full forward pass to rounding, and the K/V written are
the ones the ragged step reads later.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch

from agentbolt.engines.local.blocks import rms_norm
from agentbolt.engines.local.one_row import attend, rotation_basis

__all__ = ["TwoWayOneRowStep"]

_Stamp = tuple[tuple[int, int], ...]


@dataclass
class _Half:
    """One thread's weights of one layer."""

    qkv: torch.Tensor  # [hidden, its q + k + v columns], transposed copy
    qkv_bias: torch.Tensor | None
    o: torch.Tensor  # [its o_proj input rows, hidden]: a view of the model's weight, transposed
    gate_up: torch.Tensor  # [hidden, 2 x its intermediate columns], transposed copy
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor  # [its intermediate rows, hidden]: a view, transposed
    stamp: _Stamp


def _stamp(*tensors: torch.Tensor) -> _Stamp:
    return tuple((t._version, t.data_ptr()) for t in tensors)


def _cat_bias(parts: list[tuple[torch.Tensor | None, int, int]], like: torch.Tensor) -> torch.Tensor | None:
    """The biases of row ranges ``(bias, start, end)`` side by side (zeros for a missing one)."""
    if all(b is None for b, _, _ in parts):
        return None
    return torch.cat([b.detach()[s:e] if b is not None else like.new_zeros(e - s) for b, s, e in parts])


class TwoWayOneRowStep:
    """Decode one token for the row in KV slot 0 of ``k`` / ``v`` (``[layers, slots,
    kv_heads, capacity, head_dim]``) on two threads; returns float32 logits ``[1, vocab]``.

    Needs at least two KV heads (:meth:`applies`). The worker thread starts at the first
    call and lives until :meth:`close` (a daemon: it never keeps a process alive).
    """

    def __init__(self, model: Any, *, heads: int, kv_heads: int, head_dim: int,
                 cos: torch.Tensor, sin: torch.Tensor) -> None:
        if not self.applies(kv_heads):
            raise ValueError(f"a two-way split needs at least 2 KV heads, got {kv_heads}")
        self.model = model
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.group = heads // kv_heads
        self.cos, self.sin = cos, sin
        self.basis = rotation_basis(head_dim, cos.dtype, cos.device)
        self.layers = [(layer.input_layernorm, layer.self_attn, layer.post_attention_layernorm, layer.mlp)
                       for layer in model.model.layers]
        split = (kv_heads + 1) // 2
        self.kv_ranges = ((0, split), (split, kv_heads))
        inter = self.layers[0][3].gate_proj.weight.shape[0]
        # the intermediate columns split so that both threads read as many weights per layer: an
        # odd number of KV heads gives thread 0 more attention rows (q/k/v columns, o_proj rows,
        # hidden-long each), so it takes fewer of the MLP's (3 hidden-long rows per column)
        attention = [(b - a) * (2 * self.group + 2) * head_dim for a, b in self.kv_ranges]
        cut = min(inter - 1, max(1, round(inter / 2 + (attention[1] - attention[0]) / 6)))
        self.inter_ranges = ((0, cut), (cut, inter))
        vocab = model.lm_head.weight.shape[0]
        self.vocab_ranges = ((0, (vocab + 1) // 2), ((vocab + 1) // 2, vocab))
        self._halves: list[list[_Half | None]] = [[None] * len(self.layers) for _ in range(2)]
        self._head: list[tuple[torch.Tensor, torch.Tensor | None, _Stamp] | None] = [None, None]
        # the meeting points: at its n-th, thread t waits on _locks[t][n % 2], which its partner
        # releases (two of each, so that a release never meets a lock still unlocked from the last)
        self._locks = tuple(tuple(_locked() for _ in range(2)) for _ in range(2))
        self._out: list[list[Any]] = [[None, None], [None, None]]  # [thread][n % 2]: handed over at meeting n
        self._count = [0, 0]
        self._go, self._done = _locked(), _locked()  # the worker starts its half / has finished it
        self._job: tuple[Any, ...] | None = None
        self._logits: torch.Tensor | None = None  # the worker's logits columns
        self._error: BaseException | None = None
        self._worker: threading.Thread | None = None

    @staticmethod
    def applies(kv_heads: int) -> bool:
        """Whether a model with ``kv_heads`` KV heads can be split (each thread owns one or more)."""
        return kv_heads >= 2

    def __call__(self, token: int, length: int, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``token`` goes to position ``length`` (the positions before are cached in slot 0)."""
        if self._worker is None:
            self._start()
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            rotate = torch.addcmul(torch.diag(self.cos[length]), self.basis, self.sin[length])
            x = self.model.model.embed_tokens(torch.tensor([token], device=k.device))  # [1, hidden]
            self._job = (length, k, v, rotate, x, torch.is_inference_mode_enabled())
            self._error = None
            self._count = [0, 0]
            self._go.release()
            try:
                mine = self._half_step(0, self._job)
            finally:
                self._done.acquire()
                self._job = None
            if self._error is not None:
                for lock in (*self._locks[0], *self._locks[1]):  # both threads are out: lock them all again
                    lock.acquire(blocking=False)
                raise RuntimeError("the two-way one-row step failed") from self._error
            theirs = self._logits
            assert mine is not None and theirs is not None  # no error: both halves finished
            return torch.cat((mine, theirs), dim=1).float()
        finally:
            torch.set_num_threads(threads)

    def close(self) -> None:
        """Stop the worker thread (a later call starts a new one)."""
        if self._worker is not None:
            self._job = None
            self._go.release()
            self._worker.join()
            self._worker = None

    # ---- the two halves ----------------------------------------------------------------
    def _start(self) -> None:
        threads = torch.get_num_threads()
        ready = threading.Event()
        self._worker = threading.Thread(target=self._serve, args=(ready,), name="agentbolt-two-way", daemon=True)
        self._worker.start()
        ready.wait()
        torch.set_num_threads(threads)  # torch's default for new threads, which the worker set to 1

    def _serve(self, ready: threading.Event) -> None:
        torch.set_num_threads(1)
        ready.set()
        while True:
            self._go.acquire()
            job = self._job
            if job is None:
                return
            with torch.inference_mode(job[5]):
                self._logits = self._half_step(1, job)
            self._done.release()

    def _half_step(self, t: int, job: tuple[Any, ...]) -> torch.Tensor | None:
        """Thread ``t``'s half of the step (None where either thread failed: ``_error``)."""
        try:
            return self._run(t, *job[:5])
        except _Stopped:
            return None
        except BaseException as exc:  # noqa: BLE001 - the engine's thread raises it after the step
            if self._error is None:
                self._error = exc
            for lock in self._locks[1 - t]:  # the partner passes its next meeting point and stops there
                try:
                    lock.release()
                except RuntimeError:  # released already
                    pass
            return None

    def _meet(self, t: int, value: torch.Tensor) -> torch.Tensor:
        """Hand ``value`` to the partner and wait for its own; returns the partner's."""
        n = self._count[t] & 1
        self._count[t] += 1
        self._out[t][n] = value
        self._locks[1 - t][n].release()
        self._locks[t][n].acquire()
        if self._error is not None:
            raise _Stopped
        return self._out[1 - t][n]

    def _run(self, t: int, length: int, k: torch.Tensor, v: torch.Tensor, rotate: torch.Tensor,
             x: torch.Tensor) -> torch.Tensor:
        """Thread ``t``'s half of the step: its logits columns."""
        hd = self.head_dim
        a, b = self.kv_ranges[t]
        i0, i1 = self.inter_ranges[t]
        k_new, v_new = k[:, 0, a:b, length], v[:, 0, a:b, length]  # [layers, its kv heads, head_dim]
        k_all, v_all = k[:, :1, a:b, : length + 1], v[:, :1, a:b, : length + 1]
        for i, (norm_in, attn, norm_post, mlp) in enumerate(self.layers):
            w = self._half(t, i)
            h = rms_norm(norm_in, x)
            qkv = (torch.mm(h, w.qkv) if w.qkv_bias is None else torch.addmm(w.qkv_bias, h, w.qkv)).view(-1, hd)
            o = attend(attn, qkv, rotate, k_new[i], v_new[i], k_all[i], v_all[i])
            x = self._partial_sum(t, x, o, w.o, attn.o_proj.bias)
            h = rms_norm(norm_post, x)
            gate_up = torch.mm(h, w.gate_up) if w.gate_up_bias is None else torch.addmm(w.gate_up_bias, h, w.gate_up)
            n = i1 - i0
            x = self._partial_sum(t, x, mlp.act_fn(gate_up[:, :n]) * gate_up[:, n:], w.down, mlp.down_proj.bias)
        head, bias = self._head_half(t)
        h = rms_norm(self.model.model.norm, x)
        return torch.mm(h, head) if bias is None else torch.addmm(bias, h, head)

    def _partial_sum(self, t: int, x: torch.Tensor, inp: torch.Tensor, weight: torch.Tensor,
                     bias: torch.Tensor | None) -> torch.Tensor:
        """``x + inp_0 @ weight_0 + inp_1 @ weight_1 (+ bias)`` on both threads, from each
        thread's own product (thread 0 folds in the residual and the bias)."""
        if t == 0:
            mine = torch.addmm(x if bias is None else x + bias, inp, weight)
            theirs = self._meet(0, mine)
            return mine + theirs
        mine = torch.mm(inp, weight)
        theirs = self._meet(1, mine)
        return theirs + mine  # the same order of the same two terms as thread 0: the same row on both

    def _half(self, t: int, i: int) -> _Half:
        _, attn, _, mlp = self.layers[i]
        weights = (attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight, attn.o_proj.weight,
                   mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight)
        stamp = _stamp(*weights)
        half = self._halves[t][i]
        if half is None or half.stamp != stamp:
            half = self._make_half(t, attn, mlp, stamp)
            self._halves[t][i] = half
        return half

    def _make_half(self, t: int, attn: Any, mlp: Any, stamp: _Stamp) -> _Half:
        hd, group = self.head_dim, self.group
        a, b = self.kv_ranges[t]
        q = (a * group * hd, b * group * hd)
        kv = (a * hd, b * hd)
        i0, i1 = self.inter_ranges[t]
        mods = ((attn.q_proj, q), (attn.k_proj, kv), (attn.v_proj, kv))
        qkv = torch.cat([m.weight.detach()[s:e] for m, (s, e) in mods]).t().contiguous()
        qkv_bias = _cat_bias([(m.bias, s, e) for m, (s, e) in mods], qkv)
        gu = ((mlp.gate_proj, (i0, i1)), (mlp.up_proj, (i0, i1)))
        gate_up = torch.cat([m.weight.detach()[s:e] for m, (s, e) in gu]).t().contiguous()
        gate_up_bias = _cat_bias([(m.bias, s, e) for m, (s, e) in gu], gate_up)
        return _Half(qkv=qkv, qkv_bias=qkv_bias, o=attn.o_proj.weight.detach()[:, q[0]:q[1]].t(),
                     gate_up=gate_up, gate_up_bias=gate_up_bias,
                     down=mlp.down_proj.weight.detach()[:, i0:i1].t(), stamp=stamp)

    def _head_half(self, t: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Thread ``t``'s vocabulary columns of the output head, transposed ``[hidden, columns]``,
        and their bias."""
        head = self.model.lm_head
        stamp = _stamp(head.weight)
        entry = self._head[t]
        if entry is None or entry[2] != stamp:
            s, e = self.vocab_ranges[t]
            entry = (head.weight.detach()[s:e].t().contiguous(), _cat_bias([(head.bias, s, e)], head.weight), stamp)
            self._head[t] = entry
        return entry[0], entry[1]


class _Stopped(Exception):
    """The worker's half stops at a meeting point: the engine's thread failed."""


def _locked() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock
