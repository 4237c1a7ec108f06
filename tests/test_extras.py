"""The light install: ``pip install washout`` (the core dependencies of pyproject.toml and
what they depend on) runs the main job, and a command whose extra is missing says in one
line what to install.

The core install is a fresh virtual environment holding exactly the distributions pip
would install for ``pip install washout``: pyproject.toml's core dependencies and theirs,
resolved from the versions installed here, linked in from this environment's
site-packages (no network, a second instead of minutes of pip), and washout's own source.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from conftest import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

SPEC = """
[experiment]
name = "light"
runs = 2
seed = 1
[[test]]
name = "a"
command = "true"
[[test]]
name = "b"
command = "echo 2"
[test.metrics.n]
stdout = "last-number"
"""


def core_distributions() -> set[str]:
    """The distributions ``pip install washout`` brings: the core dependencies and,
    recursively, theirs (extras and markers as pip evaluates them here)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(r) for r in project["dependencies"]]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        for text in metadata.requires(req.name) or []:
            sub = Requirement(text)
            wanted = sub.marker is None or any(
                sub.marker.evaluate({"extra": extra}) for extra in ("", *req.extras)
            )
            if wanted:
                todo.append(sub)
    return seen


@pytest.fixture(scope="module")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv's python with washout and only its core distributions importable."""
    venv = tmp_path_factory.mktemp("core-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    here = Path(sysconfig.get_paths()["purelib"])
    for name in core_distributions():
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or []}
        for top in tops - {"..", "__pycache__"}:
            target = here / top
            if target.exists() and not (site / top).exists():
                (site / top).symlink_to(target)
    (site / "washout-src.pth").write_text(f"{ROOT / 'src'}\n")
    return python


def core_washout(python: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [python, "-m", "washout", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env={**os.environ, "PYTHONNOUSERSITE": "1", "PYTHONPATH": ""},
    )


def test_the_core_install_leaves_the_extras_out(core_python: Path) -> None:
    probe = "import importlib.util as u; print([m for m in %r if u.find_spec(m)])"
    heavy = ["matplotlib", "jinja2", "sklearn", "kneed", "statsmodels", "threadpoolctl"]
    out = subprocess.run(
        [core_python, "-c", probe % heavy], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_core_install_runs_the_main_job(core_python: Path, tmp_path: Path) -> None:
    spec = tmp_path / "light.toml"
    spec.write_text(SPEC)
    db = tmp_path / "light.db"
    for args in (
        ("validate", spec),
        ("run", spec, "--db", db, "--quiet"),
        ("status", db),
        ("resume", db),
        ("analyze", db, "--carryover", "--drift"),
        ("export", db, "-o", tmp_path / "light.csv"),
        ("analyze", tmp_path / "light.csv"),
        ("plan", "--pilot", db, "--detect", "50%"),
    ):
        proc = core_washout(core_python, *args, cwd=tmp_path)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)
    rows = (tmp_path / "light.csv").read_text().splitlines()[1:]
    assert len([r for r in rows if ",health." not in r]) == 2 * 2 * 2 * 4  # 4 metrics


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (("report", "light.csv"), "report"),
        (("explore", "space.csv", "--metric", "y"), "sweep"),
        (("sweep", "sweep.toml"), "sweep"),
    ],
)
def test_a_command_whose_extra_is_missing_says_what_to_install(
    core_python: Path, tmp_path: Path, args: tuple[str, ...], extra: str
) -> None:
    proc = core_washout(core_python, *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert f"needs the {extra} extra" in proc.stderr
    assert f"pip install 'washout[{extra}]'" in proc.stderr
