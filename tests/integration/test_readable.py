"""What a person reads (issue 14): the explorers' lookup data, and notebooks 00, 02 and 04 run by
papermill on the project's kernel, checked for raw values, warnings and empty charts."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from paths import DEMO, ROOT

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("papermill")
pytest.importorskip("pandas")


from eagle3_forensics.runs.kernel import kernel_env  # noqa: E402
from eagle3_forensics.views.widgets import _lookup_html, token_lookup_data  # noqa: E402

pytestmark = pytest.mark.notebooks

NOTEBOOK_DIR = ROOT / "notebooks"
CELL = re.compile(r"<t[dh][^>]*>(.*?)</t[dh]>", re.S)
#: what no rendered table cell may show: a raw None / NaN, or a Python byte escape
RAW = re.compile(r"^(None|NaN|nan)$|\\x[0-9a-fA-F]{2}")
EMPTY_CHART = "No per-position chart"


def raw_cells(page: str) -> list[str]:
    """Table cells of an HTML fragment whose text is a raw value."""
    cells = [html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in CELL.findall(page)]
    return [c for c in cells if RAW.search(c)]


# -- the token lookup --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lookup_absolute():
    return token_lookup_data(
        DEMO / "drafters" / "d2t_absolute", DEMO / "target", ids=DEMO / "corpus_ids.safetensors"
    )


def test_a_string_of_several_tokens_shows_its_split_once_then_each_token_once(lookup_absolute) -> None:
    data = lookup_absolute
    assert data.tokenisation("zzzqqq") == '"zzzqqq" → 6 tokens: z · z · z · q · q · q'
    rows = data.rows(["zzzqqq"])
    assert [r["token"] for r in rows] == ["z", "q"]  # distinct tokens, in the order they occur
    page = _lookup_html(data, ["zzzqqq"])
    assert page.count("6 tokens: z · z · z · q · q · q") == 1
    assert page.count("<tr>") == 2  # body rows (the header row has a style): one per distinct token
    assert data.tokenisation(" the") is None and data.tokenisation("d:3") is None  # one token: no split line


def test_an_id_beyond_the_target_vocabulary_says_so(lookup_absolute) -> None:
    # d2t_absolute stores absolute ids; engines add i again: draft 245 -> 245 + 490 = 735 of 512
    row = lookup_absolute.rows(["d:245"])[0]
    assert row["vllm"] == "draft 245 → 735 out of range (vocab 512) ✗"
    far = lookup_absolute.rows(["9999"])[0]
    assert far["token"] == "out of range (vocab 512)" and "beyond the target vocabulary" in far["note"]


def test_lookup_tables_show_no_raw_values(lookup_absolute) -> None:
    # byte tokens (the target's byte-level pieces of multi-byte characters) and missing draft ids
    page = _lookup_html(lookup_absolute, [*range(120, 200), "9999", "d:245", "zzzqqq", "no-such-xyz"])
    assert "&lt;0x" in page  # byte tokens are there, spelled <0xNN>
    assert raw_cells(page) == []
    assert "None" not in page and "NaN" not in page


def test_tables_scroll_in_a_bounded_box_with_a_sticky_header() -> None:
    import pandas as pd

    from eagle3_forensics.views.html import table_html

    page = table_html(pd.DataFrame({"name": ["<b>x</b>"], "n": [None]}))
    assert page.startswith('<div class="e3f-table-box" style="max-height:36em;max-width:100%;overflow:auto')
    assert page.count("position:sticky;top:0") == 2  # each header cell, no script
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<script" not in page and ">–</td>" in page


def test_text_left_numbers_right_fingerprints_short_with_the_full_value_on_hover() -> None:
    import re

    import pandas as pd

    from eagle3_forensics.views.html import table_html

    fp = "0123456789abcdef" * 4
    page = table_html(
        pd.DataFrame({"name": ["a", "b"], "n": [3, None], "share": ["87.3%", "0.66×"], "fp": [fp, "–"]})
    )
    aligns = re.findall(r'<t[hd] style="[^"]*text-align:(\w+)', page)
    assert aligns == ["left", "right", "right", "left"] + ["left", "right", "right", "left"] * 2, aligns
    assert f'title="{fp}"><code>0123456789ab…</code>' in page and page.count(fp) == 1


def test_evidence_json_keeps_text_and_shows_hidden_characters() -> None:
    from eagle3_forensics.views.html import compact_json, esc

    assert (
        compact_json({"engine_release": "speculators 0.7.0–0.9.0"})
        == '{"engine_release": "speculators 0.7.0–0.9.0"}'
    )
    shown = esc(compact_json({"name": "abc\u202edef"}))  # a right-to-left override in a tensor name
    assert "\u202e" not in shown and "\\u202e" in shown


# -- notebooks run headless --------------------------------------------------------------------

RUNS = {
    "00_triage": ["-p", "max_prompts", "1", "-p", "max_new_tokens", "8", "-p", "device", "cpu"],
    "02_vocab_mapping": [],
    "04_accept_rate_probe": [
        *("-p", "checkpoint", "../data/demo/drafters/d2t_absolute"),  # accepts nothing
        *("-p", "max_new_tokens", "8", "-p", "variants", "None", "-p", "device", "cpu"),
    ],
}


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Notebooks 00, 02 and 04 as papermill runs them (all at once: mostly kernel start and imports)."""
    out = tmp_path_factory.mktemp("readable")
    papermill = Path(sys.executable).with_name("papermill")
    env = {**os.environ, **kernel_env(), "OMP_NUM_THREADS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    env.pop("MPLBACKEND", None)
    procs = {
        name: subprocess.Popen(
            [
                str(papermill),
                str(NOTEBOOK_DIR / f"{name}.ipynb"),
                str(out / f"{name}.ipynb"),
                *("--cwd", str(NOTEBOOK_DIR), "-k", "eagle3-forensics", "--no-progress-bar"),
                *("--execution-timeout", "240", *args),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, args in RUNS.items()
    }
    books = {}
    for name, proc in procs.items():
        output, _ = proc.communicate(timeout=280)
        assert proc.returncode == 0, f"{name}:\n{output[-3000:]}"
        books[name] = nbformat.read(str(out / f"{name}.ipynb"), as_version=4)
    yield books


def _outputs(nb: object) -> list[dict]:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]  # type: ignore[attr-defined]


def _html(nb: object) -> str:
    return "".join(str(o.get("data", {}).get("text/html", "")) for o in _outputs(nb))


@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", sorted(RUNS))
def test_tables_show_no_raw_values_and_no_warnings(executed: dict[str, object], name: str) -> None:
    nb = executed[name]
    page = _html(nb)
    assert "<table" in page
    assert raw_cells(page) == [], name
    stderr = [o.get("text", "") for o in _outputs(nb) if o.get("name") == "stderr"]
    assert not any("Warning" in t for t in stderr), stderr  # 02: VocabPaddingWarning with its source line


@pytest.mark.timeout(400)
def test_02_padding_is_a_line_of_the_build_table(executed: dict[str, object]) -> None:
    page = _html(executed["02_vocab_mapping"])
    assert "smallest unused ids (as the trainers do)" in page  # the demo corpus has fewer ids than v


@pytest.mark.timeout(400)
def test_a_drafter_that_accepts_nothing_gets_words_once_not_an_empty_chart(
    executed: dict[str, object],
) -> None:
    for name in ("00_triage", "04_accept_rate_probe"):  # both on d2t_absolute: acceptance length 1.00
        nb = executed[name]
        pngs = [o for o in _outputs(nb) if "image/png" in o.get("data", {})]
        assert pngs == [], name  # no empty frame with a legend (04 runs without variants or a server)
        texts = _html(nb)
        assert texts.count(EMPTY_CHART) == 1, name  # said once: 00's probe controls do not repeat it
        assert "(acceptance length 1.00, 0 of " in texts, name


@pytest.mark.timeout(400)
def test_00_names_the_repair_command_for_its_finding(executed: dict[str, object]) -> None:
    """00 on its default drafter (d2t_absolute): the D2T_ABSOLUTE card gives the repair command with
    this run's paths (relative to the notebook folder, where papermill runs it), and the verdict line
    says which engines are broken and which need a conversion."""
    page = html.unescape(_html(executed["00_triage"]))
    ckpt = "../data/demo/drafters/d2t_absolute"
    for engine in ("sglang", "vllm"):
        assert (
            f"eagle3-forensics repair {ckpt} --engine {engine} --out {ckpt}-repaired-{engine} "
            "--target ../data/demo/target"
        ) in page
    assert (
        "BROKEN on sglang, vllm, eagle, tensorrt_llm" in page and "CONVERSION NEEDED for speculators" in page
    )
    assert "broken (D2T_ABSOLUTE)" in page  # the load summary says why


@pytest.mark.timeout(400)
def test_02_compare_headline_rounds_as_its_table(executed: dict[str, object]) -> None:
    page = _html(executed["02_vocab_mapping"])
    found = re.search(r"Jaccard (\d\.\d+)", page)
    assert found is not None
    assert len(found.group(1)) == 5  # three decimals, as format.rate
    assert re.search(rf"<td[^>]*>{found.group(1)}</td>", page)  # the same number in the comparison table
    assert "the same selection</p>" not in page


@pytest.mark.parametrize(
    ("notebook", "answer"),
    [
        ("00_triage", "verdict_html"),
        ("01_checkpoint_keys", "verdict_html"),
        ("02_vocab_mapping", "evidence_table"),
        ("03_token_histograms", "coverage_table"),
        ("04_accept_rate_probe", "summary_table"),
        ("05_offline_probe", "offline_summary_table"),
    ],
)
def test_each_notebook_opens_with_its_answer_and_ends_with_next(notebook: str, answer: str) -> None:
    nb = nbformat.read(str(NOTEBOOK_DIR / f"{notebook}.ipynb"), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and params[0] is code[0]  # papermill's one parameters cell, kept
    folded = [c for c in code if c.metadata.get("jupyter", {}).get("source_hidden")]
    assert code[0] in folded and code[1] in folded  # the parameters and the imports are folded away
    assert answer in code[2].source  # the first visible output is the notebook's answer
    before = [c for c in nb.cells[: nb.cells.index(code[2])] if c.cell_type == "markdown"]
    assert sum(len(c.source.splitlines()) for c in before) <= 12  # a short introduction
    headings = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown"]
    assert "## Next" in headings and "next_html(" in "".join(c.source for c in code)
