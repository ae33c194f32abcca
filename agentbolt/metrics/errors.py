"""The error a metrics sink raises when its optional library is not installed."""

from __future__ import annotations

__all__ = ["MissingIntegrationError"]


class MissingIntegrationError(ImportError):
    """An optional metrics integration (TensorBoard, W&B, MLflow) is not installed.
    The message holds the exact ``pip install`` command that fixes it."""

    def __init__(self, integration: str, pip_command: str) -> None:
        super().__init__(f"the {integration} metrics sink needs a package that is not installed: run `{pip_command}`")
        self.integration = integration
        self.pip_command = pip_command
