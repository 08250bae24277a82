"""docs/torch.md's table of LevenbergMarquardt's keywords against the library: every field of
SolverOptions listed once, with its type and its default as the library has it, and nothing
else — so that the page a user reads for the options (docs/pinn.md points there) cannot drift
from the code."""

from __future__ import annotations

import re

from conftest import ROOT

import lmtrain._core as core


def documented() -> dict[str, tuple[str, str]]:
    text = (ROOT / "docs/torch.md").read_text()
    section = text.split("## Every keyword of `LevenbergMarquardt`", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([\w ]+) \| `([^`]*)` \|", section, re.M)
    assert len(rows) == len({name for name, _, _ in rows}), "a keyword listed twice"
    return {name: (kind, default) for name, kind, default in rows}


def test_every_solver_option_is_documented_with_its_type_and_default():
    options = core.SolverOptions()
    table = documented()
    fields = dict(options.fields())
    assert set(table) == set(fields), (set(fields) - set(table), set(table) - set(fields))
    for name, kind in fields.items():
        assert table[name] == (kind, repr(getattr(options, name))), name
