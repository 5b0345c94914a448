"""Every on-disk layout the trainers write for offline EAGLE training, as data.

Sources (read from each trainer's code; see docs/offline.md for the table with file paths):

* SpecForge ``scripts/prepare_hidden_states.py``: one ``torch.save`` dict per sample under
  ``rows_<a>-<b>/data_<i>.ckpt[.gz]``; ``hidden_state`` is the **last** layer after the final norm,
  ``aux_hidden_state`` the k captured layers concatenated; rows right-padded with 0 to the batch
  maximum since 2025-11-13. Two short-lived writers (2025-11-09, 2025-11-10..12) stored other
  things under those keys.
* speculators ``data_generation_offline.py``: v0.5+ an HF ``save_to_disk`` Arrow dataset
  (``input_ids``, ``loss_mask``) plus vLLM's ``hidden_states/hs_<i>.safetensors`` (``token_ids``,
  ``hidden_states [T, k+1, H]``, slot -1 = the last layer **before** the final norm); v0.3/v0.4
  ``data_<i>.pt`` with ``hidden_states`` a list of k+1 ``[T, H]``; the removed research code
  ``<k>/data_<n>.ckpt`` with ``hidden_state`` (aux) and ``target`` (last, after the norm).
* EAGLE ``eagle/ge_data`` (EAGLE-1/2): ``{input_ids, hidden_state [T, H], loss_mask}`` — no aux
  states, so nothing an EAGLE-3 drafter can be fed.
"""

from __future__ import annotations

from dataclasses import dataclass

POST, PRE = "post", "pre"


@dataclass(frozen=True)
class DumpLayout:
    """One writer's layout: what its files hold and what a probe must do with them."""

    name: str
    trainer: str
    versions: str
    files: str
    keys: str
    eagle3: bool  # carries the aux states and the last state an EAGLE-3 probe needs
    last_norm: str | None  # the last hidden state is stored before ("pre") or after ("post") the final norm
    padded: bool = False  # rows right-padded with id 0 / mask 0 to the batch maximum
    problem: str | None = None  # why these files cannot feed an EAGLE-3 probe (None: they can)
    broken: bool = False  # a writer bug: the keys do not hold what they say
    notes: str = ""

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "trainer": self.trainer,
            "versions": self.versions,
            "files": self.files,
            "keys": self.keys,
            "eagle3": self.eagle3,
            "last_hidden_norm": self.last_norm,
            "padded_rows": self.padded,
            "problem": self.problem,
            "broken": self.broken,
            "notes": self.notes,
        }


_LAYOUTS = (
    DumpLayout(
        "specforge",
        "SpecForge",
        "2025-11-13 (cd32229d) to current; .ckpt.gz with --compress since 2026-01-26",
        "rows_<a>-<a+2000>/data_<i>.ckpt[.gz]; vocab_mapping/vocab_mapping.pt",
        "input_ids [T], loss_mask [T], hidden_state [1,T,H], aux_hidden_state [1,T,k*H]",
        eagle3=True,
        last_norm=POST,
        padded=True,
        notes="rows are right-padded with id 0 / mask 0 to the batch maximum; the trailing pad run is "
        "trimmed before scoring (so the last real token gets no teacher from a pad position)",
    ),
    DumpLayout(
        "specforge-v0.1",
        "SpecForge",
        "v0.1.0 (2025-07-22) to 2025-11-08",
        "rows_<a>-<a+5000>/data_<i>.ckpt",
        "input_ids [T], loss_mask [T], hidden_state [1,T,H], aux_hidden_state [1,T,k*H]",
        eagle3=True,
        last_norm=POST,
        notes="one request per row, unpadded",
    ),
    DumpLayout(
        "specforge-no-aux",
        "SpecForge",
        "v0.1.0 to 2025-11-08 without --enable-aux-hidden-states",
        "rows_<a>-<b>/data_<i>.ckpt",
        "input_ids [T], loss_mask [T], hidden_state [1,T,H]",
        eagle3=False,
        last_norm=POST,
        problem="no aux hidden states (EAGLE-1/2-style data): nothing to feed an EAGLE-3 drafter's fc",
    ),
    DumpLayout(
        "specforge-2025-11-09",
        "SpecForge",
        "35504d45 (2025-11-09, HF backend)",
        "rows_<a>-<a+2000>/data_<i>.ckpt",
        "input_ids [Tpad], loss_mask [Tpad], hidden_state [1,T,k*H] (the aux concat)",
        eagle3=False,
        last_norm=None,
        broken=True,
        problem="hidden_state holds the k*H aux concat and aux_hidden_state was never written: the last "
        "hidden state (the teacher) is missing, and input_ids are padded while the states are not",
    ),
    DumpLayout(
        "specforge-2025-11-10",
        "SpecForge",
        "d5de56f7 (2025-11-10 to 2025-11-12)",
        "rows_<a>-<a+2000>/data_<i>.ckpt",
        "input_ids [Tpad], loss_mask [Tpad], hidden_state [1,T,V] (shifted logits), aux_hidden_state [1,T,k*H]",
        eagle3=False,
        last_norm=None,
        broken=True,
        problem="hidden_state holds full-vocabulary logits already shifted by one, not the last hidden state",
    ),
    DumpLayout(
        "specforge-dflash",
        "SpecForge",
        "2026-07-17 on, --strategy dflash/domino/dspark",
        "rows_<a>-<b>/data_<i>.ckpt",
        "input_ids, loss_mask, hidden_states [1,T,k*H] (+ target_last_hidden_states)",
        eagle3=False,
        last_norm=None,
        problem="DFlash/Domino/DSpark features, not EAGLE-3 dumps",
    ),
    DumpLayout(
        "speculators",
        "speculators",
        "v0.5.0 to current (vLLM extract_hidden_states)",
        "<data>/ Arrow dataset (input_ids, loss_mask) + hidden_states/hs_<i>.safetensors; token_freq.pt, "
        "d2t.npy, t2d.npy",
        "token_ids [T], hidden_states [T,k+1,H] (older vLLM: [k+1,T,H])",
        eagle3=True,
        last_norm=PRE,
        notes="slot -1 is the output of the last decoder layer before the final norm; row i of the Arrow "
        "dataset pairs with hs_i",
    ),
    DumpLayout(
        "speculators-v0.4",
        "speculators",
        "v0.3.0 to v0.4.x",
        "<out>/data_<i>.pt, data_config.json, sample_lengths.json",
        "input_ids [T], hidden_states (list of k+1 [T,H]), loss_mask [T]",
        eagle3=True,
        last_norm=PRE,
        notes="the aux entries are the outputs of layers 2, N//2, N-3 (HF index 3, N//2+1, N-2): one "
        "layer later than the engines feed at serving time",
    ),
    DumpLayout(
        "speculators-research",
        "speculators",
        "research/eagle3 (removed; tag deprecated-eagle3-research-code)",
        "<out>/<k>/data_<n>.ckpt",
        "input_ids [T], hidden_state [T,k*H] (aux), loss_mask [T], target [T,H]",
        eagle3=True,
        last_norm=POST,
        notes="here hidden_state is the aux concat and target the last hidden state",
    ),
    DumpLayout(
        "eagle-ge-data",
        "EAGLE",
        "eagle/ge_data (EAGLE-1/2; deleted with the EAGLE-3 commit f2f2366)",
        "<out>/sharegpt_<s>_<e>_mufp16/<k>/data_<n>.ckpt",
        "input_ids [T], hidden_state [T,H] (fp16), loss_mask [T]",
        eagle3=False,
        last_norm=POST,
        problem="EAGLE-1/2 data: one last hidden state per token and no aux states, so it cannot feed an "
        "EAGLE-3 drafter (EAGLE-3 itself trains online and writes no dumps)",
    ),
)

LAYOUTS: dict[str, DumpLayout] = {layout.name: layout for layout in _LAYOUTS}

#: ``--format`` choices -> the layouts each admits
FORMATS: dict[str, tuple[str, ...]] = {
    "auto": tuple(LAYOUTS),
    "specforge": tuple(n for n in LAYOUTS if n.startswith("specforge")),
    "speculators": tuple(n for n in LAYOUTS if n.startswith("speculators")),
    "eagle": ("eagle-ge-data",),
}

__all__ = ["FORMATS", "LAYOUTS", "POST", "PRE", "DumpLayout"]
