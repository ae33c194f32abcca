"""What the GRPO examples share, so that each ``train.py`` shows only its own idea.

``examples/calc``, ``examples/calc_tools`` and ``examples/harness_shell`` train SmolLM2-135M
with GRPO + LoRA on the same kind of run: the same command-line options, the same
``GRPOConfig`` read from them, a run directory that resumes unless ``--fresh``, a learning
curve, the held-out line printed at the end, and a broken setup reported in one line.
Those live here; the agent, its task, the wiring that is particular to the example (the
engine in this process or in a server, a harness and its sandbox) and its summary stay in
the example's ``train.py``.

Two modules serve the teacher-and-ladder examples (``calc``, ``sql_agent``,
``harness_mini_swe_agent``) and are imported by module: ``_common.teacher_server`` (a
scripted teacher served as an OpenAI-compatible model) and ``_common.settings`` (a
``--config`` YAML file).

An example puts ``examples/`` on ``sys.path`` (next to its own folder) and imports this
package as ``_common``; so it runs as a script from the repository root or from its own
folder alike.
"""

from __future__ import annotations

from _common.curve import plot_curve
from _common.local import in_process_trainer
from _common.options import fresh_run_dir, grpo_config, grpo_parser
from _common.report import held_out_line, pct, run_main

__all__ = ["fresh_run_dir", "grpo_config", "grpo_parser", "held_out_line", "in_process_trainer", "pct", "plot_curve",
           "run_main"]
