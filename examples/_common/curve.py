"""The learning curve of a GRPO run, as a PNG."""

from __future__ import annotations

from pathlib import Path

from agentbolt.algorithms import GRPOResult


def plot_curve(result: GRPOResult, path: Path, title: str, *, reward: bool = True,
               bars: tuple[str, list[float]] | None = None) -> Path | None:
    """Per GRPO step: the training success (sampled at T=1), the mean reward (``reward``)
    and ``bars`` (a label and one value a step); the greedy held-out success before (at
    step 0) and after (at the last step). None, with a note, without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no learning_curve.png (pip install 'agentbolt[plot]')")
        return None
    steps = list(range(1, len(result.history) + 1))
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, [h.get("success_rate") for h in result.history], marker="o", label="train success (T=1)")
    if reward:
        ax.plot(steps, [h.get("reward/mean") for h in result.history], marker=".", alpha=0.6,
                label="train mean reward")
    if bars is not None:
        ax.bar(steps, bars[1], width=0.3, color="red", alpha=0.5, label=bars[0])
    for x, res, name in ((0, result.before, "held-out before"), (len(steps), result.after, "held-out after")):
        if res is not None and res.success_rate is not None:
            ax.scatter([x], [res.success_rate], s=80, zorder=3, label=f"{name} (greedy)")
    # the examples' rewards go up to 1.1 (+0.1 for a well-formed call)
    ax.set(xlabel="GRPO step", ylabel="rate" if reward else "success rate", ylim=(-0.02, 1.15 if reward else 1.05),
           title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
