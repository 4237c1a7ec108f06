"""python -m washout: the same as the washout console script."""

from washout.cli import console

console()
