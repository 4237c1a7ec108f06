"""Executors run a worker's commands: the local machine (subprocess) or SSH (asyncssh)."""

from washout.harness.executors.base import CommandResult, Executor

__all__ = ["CommandResult", "Executor"]
