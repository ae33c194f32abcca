"""APO: automatic prompt optimisation with textual gradients (:class:`APO`, :mod:`.algorithm`) and its parts.

* :mod:`.config` — :class:`APOConfig`, every knob, loadable from YAML.
* :mod:`.result` — :class:`APOResult` and :class:`RoundRecord`, what a run returns; :class:`APOError`.
* :mod:`.run_state` — :class:`APORun`, the state one run works with.
* :mod:`.critic_models` — the critic's and editor's models (an endpoint, the run's engine, any chat object).
* :mod:`.candidates` — :class:`Candidate` (template, lineage, scores) and the history files for resume.
* :mod:`.placeholders` — the ``{fields}`` of a template, and whether an edit kept them.
* :mod:`.textual_gradient` — the critic's and editor's prompts, trace rendering, model clients.
* :mod:`.selection` — beam (top-k by mean) and Pareto (best on some item) selection.
"""

from agentbolt.algorithms.apo.algorithm import APO
from agentbolt.algorithms.apo.candidates import APOState, Candidate, load_history
from agentbolt.algorithms.apo.config import APOConfig
from agentbolt.algorithms.apo.placeholders import (
    PlaceholderError,
    check_edit,
    check_formats,
    placeholders,
)
from agentbolt.algorithms.apo.result import APOError, APOResult, RoundRecord
from agentbolt.algorithms.apo.selection import (
    best_of,
    fronts,
    select_beam,
    select_pareto,
)
from agentbolt.algorithms.apo.textual_gradient import (
    ChatCallError,
    ChatModel,
    EngineChatModel,
    HttpChatModel,
    TextualGradient,
    parse_template,
    render_trace,
)

__all__ = [
    "APO",
    "APOConfig",
    "APOError",
    "APOResult",
    "APOState",
    "Candidate",
    "ChatCallError",
    "ChatModel",
    "EngineChatModel",
    "HttpChatModel",
    "PlaceholderError",
    "RoundRecord",
    "TextualGradient",
    "best_of",
    "check_edit",
    "check_formats",
    "fronts",
    "load_history",
    "parse_template",
    "placeholders",
    "render_trace",
    "select_beam",
    "select_pareto",
]
