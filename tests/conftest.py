"""Fixtures shared by several test files."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

#: the real KTH-SP2 log in the data directory beside the checkout (tests using it skip without it)
KTH = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "KTH-SP2" / "KTH-SP2-1996-2.1-cln.swf.gz"


@pytest.fixture(scope="module")
def tiny_log(tmp_path_factory) -> str:
    """The header and first 250 jobs of the real KTH-SP2 log (100 processors, real users), as a file."""
    if not KTH.is_file():
        pytest.skip("KTH-SP2 log not present")
    out = tmp_path_factory.mktemp("log") / "kth-head.swf"
    lines, jobs = [], 0
    with gzip.open(KTH, "rt") as fh:
        for line in fh:
            if not line.startswith(";"):
                jobs += 1
                if jobs > 250:
                    break
            lines.append(line)
    out.write_text("".join(lines))
    return str(out)
