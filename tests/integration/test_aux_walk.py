"""Issue 30's walk through notebook 06: the demo healthy drafter (trained on HF [2, 4, 5]) with
``eagle_aux_hidden_state_layer_ids: [2, 4, 7]``, served on vLLM and on SGLang.

06 must name the config's ids first on both engines (not "no cause found" on vLLM, not "ignored by
the engine" at no cost on SGLang), and the repair it suggests must pin the measured [2, 4, 5] and
raise (never lower) acceptance. Real target, real probe, real repair.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the probe extra; absent in the core-only tier
pytest.importorskip("pandas")

from paths import DEMO, demo_drafter_copy

from eagle3_forensics.cli.main import main
from eagle3_forensics.views.causes import ranking_text
from eagle3_forensics.views.why import why_low_acceptance

TARGET = DEMO / "target"
PROMPTS = DEMO / "prompts.jsonl"


@pytest.fixture(scope="module")
def wrong_ids(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("walk") / "healthy-247"
    return demo_drafter_copy(dst, eagle_aux_hidden_state_layer_ids=[2, 4, 7])


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_06_names_the_config_ids_first_and_the_repair_raises_acceptance(
    engine: str, wrong_ids: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    w = why_low_acceptance(wrong_ids, TARGET, engine=engine, prompts=PROMPTS)
    r = w.ranking
    assert r.codes and r.codes[0] == "AUX_LAYER_IDS_NOT_TRAINED", ranking_text(r)
    top = r.causes[0]
    assert top.cost is not None and top.cost.basis == "measured" and top.cost.acceptance_length_drop
    assert top.cost.acceptance_length_drop > 0.1
    assert "AUX_LAYER_IDS_IGNORED_BY_ENGINE" not in {c for cause in r.causes for c in cause.codes}
    assert w.measured_aux is not None and w.measured_aux.best.ids == (2, 4, 5)

    out = tmp_path / f"repaired-{engine}"
    rc = main(
        ["repair", str(wrong_ids), "--engine", engine, "--out", str(out), "--target", str(TARGET), "--json"]
    )
    payload = json.loads(capsys.readouterr().out)
    assert rc == 0 and payload["status"] == "repaired", payload["message"]
    c = payload["confirm"]
    assert not c["lowered"] and c["acceptance_length_after"] >= c["acceptance_length_before"]
    cfg = json.loads((out / "config.json").read_text())
    if engine == "vllm":
        assert cfg["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
        assert c["acceptance_length_after"] > c["acceptance_length_before"]  # 3.065 -> 3.310 on 06's prompts
    else:
        assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]  # SGLang adds 1

    after = why_low_acceptance(out, TARGET, engine=engine, prompts=PROMPTS)
    assert after.ranking.codes == [], ranking_text(after.ranking)
    assert after.ranking.acceptance_length is not None and r.acceptance_length is not None
    assert after.ranking.acceptance_length >= r.acceptance_length


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_probe_and_diagnose_measure_the_trained_layers(
    wrong_ids: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``probe --measure-aux`` reports the trained set; ``diagnose --measure-aux`` lets it decide."""
    base = [str(wrong_ids), "--target", str(TARGET)]
    rc = main(
        [
            "probe",
            *base,
            "--prompts",
            str(PROMPTS),
            "--max-new-tokens",
            "8",
            "--no-sweep",
            "--measure-aux",
            "--json",
        ]
    )
    payload = json.loads(capsys.readouterr().out)
    assert rc == 0 and payload["trained_aux"]["best_ids_hf"] == [2, 4, 5]
    rc = main(["diagnose", *base, "--engine", "sglang", "--measure-aux", str(PROMPTS), "--json"])
    d = json.loads(capsys.readouterr().out)
    codes = {(f["code"], f["engine"]) for f in d["findings"]}
    assert rc == 1 and ("AUX_LAYER_IDS_NOT_TRAINED", "sglang") in codes
    assert ("AUX_LAYER_IDS_IGNORED_BY_ENGINE", "sglang") not in codes
    assert main(["diagnose", str(wrong_ids), "--measure-aux", str(PROMPTS)]) == 2  # needs --target
