"""The "Next" section every notebook ends with (eagle3_forensics.views.next_steps), over the demo drafters.

Real diagnoses of real demo checkpoints: the repair command a broken drafter needs, with this run's
paths; nothing to repair for a healthy one; no invented commands when there is no drafter directory.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from paths import DEMO

from eagle3_forensics.checks.diagnose import diagnose
from eagle3_forensics.views.next_steps import diagnosis_for, next_html, papermill_line


def plain(page: str) -> str:
    """The section's text, tags dropped, entities of the escaped commands undone."""
    return " ".join(re.sub(r"<[^>]+>", " ", page).replace("&#x27;", "'").replace("&amp;", "&").split())


def test_a_broken_drafter_gets_the_repair_and_how_to_confirm_it() -> None:
    ckpt, target = str(DEMO / "drafters" / "d2t_absolute"), str(DEMO / "target")
    d = diagnose(ckpt, target=target, engines="sglang")
    text = plain(next_html("00_triage", {"checkpoint": ckpt, "target": target, "engine": "sglang"}, d))
    out = f"{ckpt}-repaired-sglang"
    assert f"eagle3-forensics repair {ckpt} --engine sglang --out {out} --target {target}" in text
    assert f"eagle3-forensics diagnose {out} --engine sglang --target {target}" in text
    # the copy, probed in 04 as SGLang loads it
    assert (
        f"papermill 04_accept_rate_probe.ipynb ../build/notebooks/probe.ipynb -k eagle3-forensics -p checkpoint {out} -p engine sglang"
        in text
    )
    # and this notebook, on your drafter
    assert (
        f"papermill 00_triage.ipynb ../build/notebooks/triage.ipynb -k eagle3-forensics -p checkpoint {ckpt}"
        in text
    )


def test_a_healthy_drafter_has_nothing_to_repair() -> None:
    ckpt = str(DEMO / "drafters" / "healthy")
    d = diagnosis_for(ckpt, str(DEMO / "target"), "sglang")
    assert d is not None and d.engines == ["sglang"]
    text = plain(next_html("04_accept_rate_probe", {"checkpoint": ckpt, "engine": "sglang"}, d))
    assert "nothing to repair for sglang" in text and "eagle3-forensics repair" not in text


def test_no_drafter_directory_no_commands(tmp_path: Path) -> None:
    map_file = tmp_path / "map.safetensors"
    map_file.write_bytes(b"")
    assert diagnosis_for(str(map_file)) is None
    text = plain(next_html("02_vocab_mapping", {"checkpoint": str(map_file)}, None))
    assert "no diagnosis here" in text and "eagle3-forensics repair" not in text


@pytest.mark.parametrize("value", ["dir with space/x", "it's", None])
def test_the_papermill_line_is_one_shell_command(value: str | None) -> None:
    line = papermill_line("01_checkpoint_keys", {"checkpoint": value})
    mkdir, _, run = line.partition(" && ")
    assert shlex.split(mkdir) == ["mkdir", "-p", "../build/notebooks"]  # git ignores build/
    words = shlex.split(run)
    assert words[:3] == ["papermill", "01_checkpoint_keys.ipynb", "../build/notebooks/checkpoint_keys.ipynb"]
    assert words[-3:] == ["-p", "checkpoint", "None" if value is None else value]
