"""``audit-data --target``: what the target says about the samples, measured per sample during the scan.

* provenance: the agreement between the target's greedy next token (a labeller the caller passes:
  ``probe.offline.teacher.GreedyLabeller``, the dumped last hidden state through the target's
  ``lm_head``) and the data's next token over the loss-masked positions;
* rendering: the think-block outcome and whether the target's own chat template reproduces the
  sample's text (:mod:`eagle3_forensics.vocab.renderings`), against the serving mode;
* length: each sample's length, against the serving context (``--launch``'s max-model-len /
  context-length, else the target's ``max_position_embeddings``).

:func:`serving_settings` is what every shard computes identically (it goes into the scan's settings);
:class:`SampleFit` measures one sample into plain, mergeable records.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from eagle3_forensics.engines.launch import LAUNCH_RELEASES, Setting, read_launch
from eagle3_forensics.errors import BadArgumentsError, UnusableInputError
from eagle3_forensics.io.dumps.read import Sample
from eagle3_forensics.io.launch import split_command
from eagle3_forensics.vocab.chat import default_mode, load_chat_template, structural_tokens
from eagle3_forensics.vocab.renderings import Renderings, classify, renderings

Labeller = Callable[[Sample], Any]  # sample -> int labels per position (labels[p]: token p+1), or None
#: the temperatures a labeller gives the target's greedy-token probability at: 1 (reported) and the
#: highest people sample training data at (the null of DATA_NOT_FROM_TARGET: docs/findings.md)
TEMPERATURES = (1.0, 1.2)


def served_context(launch: str | None, base: Path | None = None) -> dict[str, Any] | None:
    """The context a ``--launch`` command line serves with (vLLM ``--max-model-len``, SGLang
    ``--context-length``, trtllm-serve ``--max_seq_len``: the launch tables' ``max_model_len``), or
    ``None`` when it sets none. A command no launch table reads is a :class:`BadArgumentsError`."""
    if launch is None:
        return None
    line = split_command(launch)
    tables = LAUNCH_RELEASES.get(line.engine)
    if not tables:
        raise BadArgumentsError(
            f"--launch: no launch rules for {line.program!r}; known: {', '.join(LAUNCH_RELEASES)}"
        )
    rules = tables[-1]
    settings = read_launch(line, rules, base)
    value = settings.get(Setting.MAX_MODEL_LEN)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        return None
    return {
        "tokens": value,
        "from": f"--launch ({settings.given.get(Setting.MAX_MODEL_LEN.value, 'max_model_len')})",
    }


def _template_settings(target: str | Path, kwargs: Mapping[str, Any] | None) -> dict[str, Any] | None:
    try:
        chat = load_chat_template(target)
        if chat is None:
            return None
        r = renderings(chat)
        served = default_mode(chat, kwargs)
    except UnusableInputError:  # no tokenizer, or a template that refuses the sentinel conversation
        return None
    return {
        **r.to_dict(),
        "served_mode": served,
        "served_from": "--chat-template-kwargs" if kwargs else "the template's default",
        "template_kwargs": dict(kwargs or {}),
        "served_expects": r.expected.get(served) if served else None,
    }


def serving_settings(
    target: str | Path | None,
    tfacts: Mapping[str, Any] | None,
    launch: str | None,
    template_kwargs: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The serving side every shard computes identically: context and template mode."""
    ctx = served_context(launch)
    if ctx is None and tfacts and isinstance(tfacts.get("max_position_embeddings"), int):
        ctx = {
            "tokens": int(tfacts["max_position_embeddings"]),
            "from": "the target's max_position_embeddings",
        }
    return {
        "context": ctx,
        "launch": launch,
        "template": _template_settings(target, template_kwargs) if target is not None else None,
    }


class SampleFit:
    """Measures one sample against the target: agreement (with a labeller) and rendering (with a template)."""

    def __init__(self, target: str | Path | None, labeller: Labeller | None, with_template: bool) -> None:
        self.labeller = labeller
        self.renderings: Renderings | None = None
        self.template_tokens: np.ndarray = np.zeros(0, dtype=np.int64)
        chat = None
        if target is not None and (with_template or labeller is not None):
            try:
                chat = load_chat_template(target)
            except UnusableInputError:
                chat = None
        if chat is not None:
            if with_template:
                self.renderings = renderings(chat)
            # tokens the template writes (think/tool tags, end of turn, specials) are not the writer's:
            # a pipeline that re-renders reasoning_content places them whoever wrote the text
            st = structural_tokens(chat)
            self.template_tokens = np.asarray(
                sorted(t for t, k in st.kinds.items() if k != "scaffold"), np.int64
            )

    def agreement(self, sample: Sample) -> tuple[int, int, float, float, float, float] | None:
        """``(agree, total, expected, variance, expected_max, variance_max)`` over the loss-masked
        positions ``p + 1`` that have a teacher, leaving out the tokens the chat template writes (as
        the data's token or the target's).
        ``expected``: the sum of the target's probability of its own greedy token there at temperature
        1 — the agreement data sampled from the target so would have; ``expected_max``: the same at the
        highest of :data:`TEMPERATURES` (lower temperatures, greedy, top-k and top-p agree more);
        ``variance*``: their binomial variances (``-1``: the labeller gives no such probabilities)."""
        if self.labeller is None:
            return None
        got = self.labeller(sample)
        if got is None:
            return None
        labels, top = got if isinstance(got, tuple) else (got, None)
        lab = np.asarray(labels, dtype=np.int64)[:-1]
        nxt = sample.input_ids.numpy()[1:]
        # structural tokens on either side (an end of turn the data cut or the target wanted, think tags)
        # are where the pipeline decides, not the writer: left out
        keep = (
            sample.loss_mask.numpy()[1:].astype(bool)
            & (lab >= 0)
            & ~np.isin(nxt, self.template_tokens)
            & ~np.isin(lab, self.template_tokens)
        )
        total = int(keep.sum())
        agree = int((lab[keep] == nxt[keep]).sum())
        if top is None:
            return agree, total, -1.0, -1.0, -1.0, -1.0
        probs = np.asarray(top, dtype=np.float64)
        probs = probs[:, None] if probs.ndim == 1 else probs
        out: list[float] = []
        for col in (0, probs.shape[1] - 1) if probs.shape[1] > 1 else (0,):
            p = probs[:-1, col][keep]
            out += [round(float(p.sum()), 6), round(float((p * (1 - p)).sum()), 6)]
        if len(out) == 2:
            out += [-1.0, -1.0]
        return agree, total, out[0], out[1], out[2], out[3]

    def rendering(self, sample: Sample) -> dict[str, Any] | None:
        if self.renderings is None:
            return None
        ids = sample.input_ids.numpy().tolist()
        return classify(ids, self.renderings, sample.loss_mask.numpy().astype(bool).tolist())
