"""Settings from a YAML file: what the ladder examples (``--config cpu.yaml | gpu.yaml``) read."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def load_config(path: Path, example: Path) -> dict[str, Any]:
    """The mapping in the YAML file ``path``; a CLI error naming ``example`` (a config that
    works) when there is no such file or it holds something else."""
    import yaml

    if not path.is_file():
        raise SystemExit(f"no config file at {path}: pass --config with a YAML file like {example}")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return data
