"""The README's Python example runs as printed, and its first lines give the two set-up commands."""
from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_example_runs(capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    exec(compile(blocks[0], "README.md", "exec"), {})  # noqa: S102 - our own documentation
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and [l.split(":")[0].strip() for l in lines] == ["fcfs", "easy", "conservative"]


def test_readme_starts_with_the_install_and_test_commands():
    head = README.read_text().split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert head[0].startswith("pip install -e . && hpctwin run")
    assert "python -m pytest" in head[1]
