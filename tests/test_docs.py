"""The README stays true: its spec parses, and it has exactly the two set-up commands."""

from __future__ import annotations

import re

from conftest import ROOT
from washout.spec import expand_tests, parse_spec_text

README = (ROOT / "README.md").read_text()


def test_readme_spec_is_valid() -> None:
    block = re.search(r"```toml\n(.*?)```", README, re.S)
    assert block is not None
    spec = parse_spec_text(block.group(1), "README.md")
    assert len(expand_tests(spec, "README.md")) == 5
    assert spec.experiment.claims == ["fio-read-4k > 1.05 * fio-randread-4k"]


def test_readme_has_the_two_setup_commands_and_ci_runs_the_second() -> None:
    commands = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    assert len(commands) == 2
    assert "washout run examples/quickstart.toml" in commands[0]
    assert (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1].startswith(commands[1])
