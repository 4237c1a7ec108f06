"""The docs stay true: the README's and the design's specs parse, the README has exactly the two
set-up commands, links resolve, and nothing refers to files outside the repository."""

from __future__ import annotations

import re
import subprocess

from conftest import ROOT

from washout.harness.spec import expand_tests, parse_spec_text

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


def tracked_files() -> list[str]:
    """The repository's tracked files (what a clone has)."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [name for name in out.stdout.decode().split("\0") if name]


def test_no_tracked_file_refers_outside_the_repository() -> None:
    # [x] classes keep this file from matching itself.
    outside = re.compile(rb"\.\./shared|shared/[f]ixtures|METHOD-[N]OTES|(?<![\w/])[D]ESIGN\.md")
    offenders = [
        name
        for name in tracked_files()
        if (ROOT / name).is_file() and outside.search((ROOT / name).read_bytes())
    ]
    assert offenders == []


def test_design_spec_example_is_valid() -> None:
    design = (ROOT / "docs" / "design.md").read_text()
    block = re.search(r"```toml\n(.*?)```", design, re.S)
    assert block is not None
    spec = parse_spec_text(block.group(1), "docs/design.md")
    assert len(expand_tests(spec, "docs/design.md")) == 5
    assert spec.teardown is not None and spec.reset is not None


def test_relative_links_in_the_docs_resolve() -> None:
    pages = [name for name in tracked_files() if name.endswith(".md")]
    broken = []
    for page in pages:
        text = (ROOT / page).read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target and not (ROOT / page).parent.joinpath(target).exists():
                broken.append(f"{page}: {target}")
    assert broken == []
