"""Checks on the key layout, the config and what each engine would load."""

from __future__ import annotations

from collections.abc import Iterator

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines import ENGINES
from eagle3_forensics.engines.simulate import aux_ids_read
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.layout import is_drafter_weight

_MAX_LISTED = 40
CONFIG_FIXES = {
    "sglang": "Write a flat config with architectures ['LlamaForCausalLMEagle3'] (the speculators shim accepts only "
    "'Eagle3Speculator'), draft_vocab_size, and aux ids in eagle_config.",
    "vllm": "Write a flat LlamaForCausalLMEagle3 config or a speculators config with speculators_model_type.",
    "eagle": "Write a flat Llama config with hidden_size, vocab_size and draft_vocab_size at top level.",
    "speculators": "Convert with `speculators convert SRC --algorithm eagle3 --verifier TARGET --output-path DST`.",
}


def _listed(names: list[str]) -> list[str]:
    return names[:_MAX_LISTED]


def check_is_eagle3(ctx: Context) -> Iterator[Finding]:
    cfg = ctx.cfg
    smt = cfg.raw.get("speculators_model_type")
    if smt is not None and smt != "eagle3":
        yield Finding(
            "NOT_EAGLE3",
            Severity.ERROR,
            f"speculators_model_type is {smt!r}, not 'eagle3'.",
            evidence={"speculators_model_type": smt},
            fix="Use a tool for that speculator type; eagle3-forensics covers EAGLE-3 only.",
        )
        return
    fc = ctx.shape("fc.weight")
    q = ctx.shape(
        "midlayer.self_attn.q_proj.weight",
        "layers.0.self_attn.q_proj.weight",
        "midlayer.self_attn.qkv_proj.weight",
    )
    h = cfg.hidden_size
    if fc is None:
        yield Finding(
            "NOT_EAGLE3",
            Severity.ERROR,
            "No fc.weight: an EAGLE-3 drafter fuses the target's aux hidden states through fc.",
            evidence={"reason": "fc.weight missing", "keys": _listed(ctx.ckpt.names())},
            fix="Point the tool at the drafter directory (not the target), or re-export the drafter.",
        )
        return
    if q is not None and h is not None and len(q) == 2 and q[1] != 2 * h:
        yield Finding(
            "NOT_EAGLE3",
            Severity.ERROR,
            f"The decoder's q_proj takes {q[1]} inputs; EAGLE-3 concatenates embedding and fused "
            f"features, 2 × hidden_size = {2 * h}.",
            evidence={"reason": "q_proj input width", "shape": list(q), "hidden_size": h},
            fix="This looks like an EAGLE-1/2 or plain decoder; EAGLE-3 engines cannot serve it.",
        )
        return
    if len(fc) == 2 and h is not None and fc[1] == 2 * h and cfg.target_hidden_size is None:
        yield Finding(
            "NOT_EAGLE3",
            Severity.ERROR,
            f"fc.weight is {list(fc)}: [H, 2H] is the EAGLE-1/2 fc (embedding + one hidden state).",
            evidence={"reason": "fc width 2H", "shape": list(fc), "hidden_size": h},
            fix="Serve it with the EAGLE (v1/v2) method, or retrain as EAGLE-3.",
        )


def check_config_readable(ctx: Context) -> Iterator[Finding]:
    for name, load in ctx.loads.items():
        if load.config_readable:
            continue
        # An engine that never reads this config layout (speculators vs a flat EAGLE config) is not a
        # target of this drafter unless the user named it: then it is an error, otherwise information.
        foreign = ctx.cfg.style not in ENGINES[name].config_styles
        severity = Severity.INFO if foreign and not ctx.explicit_engines else Severity.ERROR
        yield Finding(
            "CONFIG_UNREADABLE_BY_ENGINE",
            severity,
            f"{ENGINES[name].display} cannot use this config: {load.config_problem}.",
            engine=name,
            evidence={
                "problem": load.config_problem,
                "config_style": ctx.cfg.style,
                "architectures": ctx.cfg.architectures,
                **ctx.evidence_base(name),
            },
            fix=CONFIG_FIXES.get(name, "Write the config layout this engine reads."),
        )


def check_key_fates(ctx: Context) -> Iterator[Finding]:
    for name, load in ctx.loads.items():
        rules = ENGINES[name]
        dropped = load.keys_with("dropped", "warned")
        if dropped:
            # A full-vocabulary drafter needs no map: an engine that deletes its d2t/t2d buffers loses nothing.
            harmless = set() if ctx.reduced_vocab else {"d2t", "t2d"}
            trained = [
                k for k in dropped if is_drafter_weight(k) and k.removeprefix("model.") not in harmless
            ]
            verb = "ignores with a warning" if rules.unknown_keys == "warn" else "silently drops"
            layout = ctx.fmt.key_layout
            fix = None
            if any(k.startswith("layers.") for k in trained) and name in ("sglang", "eagle"):
                fix = f"Rename layers.0.* to midlayer.* (the names {rules.display} expects), in a copy of the checkpoint."
            elif trained:
                fix = "Rename them to the engine's names (see the load report), or serve on an engine that uses them."
            yield Finding(
                "KEYS_DROPPED_BY_ENGINE",
                Severity.ERROR if trained else Severity.INFO,
                f"{rules.display} {verb} {len(dropped)} tensor(s)"
                + (
                    f", {len(trained)} of them trained drafter weights ({layout} layout)"
                    if trained
                    else " (not drafter weights; harmless)"
                )
                + ".",
                engine=name,
                evidence={
                    "dropped": _listed(dropped),
                    "count": len(dropped),
                    "trained": _listed(trained),
                    **ctx.evidence_base(name),
                },
                fix=fix,
            )
        rejected = load.keys_with("rejected")
        if rejected:
            yield Finding(
                "KEYS_REJECTED_BY_ENGINE",
                Severity.ERROR,
                f"{rules.display} refuses to load {len(rejected)} tensor(s) it has no parameter for "
                f"(e.g. {rejected[0]!r}); loading fails.",
                engine=name,
                evidence={"rejected": _listed(rejected), "count": len(rejected), **ctx.evidence_base(name)},
                fix="Remove them, or rename them to the engine's names (see the load report), in a copy of the checkpoint.",
            )
        if load.unfilled and load.config_readable:
            yield Finding(
                "PARAMS_UNFILLED",
                Severity.ERROR,
                f"{len(load.unfilled)} {rules.display} parameter(s) get no tensor from this checkpoint and stay at "
                f"initialisation (e.g. {load.unfilled[0]!r}).",
                engine=name,
                evidence={
                    "unfilled": _listed(load.unfilled),
                    "count": len(load.unfilled),
                    **ctx.evidence_base(name),
                },
                fix="Provide these tensors under the names the engine expects (see the load report's dropped keys).",
            )


def check_layers(ctx: Context) -> Iterator[Finding]:
    configured = ctx.cfg.num_hidden_layers or 1
    layers = max(configured, ctx.fmt.decoder_layers)
    if layers <= 1:
        return
    for rules in ctx.engines:
        if rules.max_layers is not None and layers > rules.max_layers:
            yield Finding(
                "MULTI_LAYER_DRAFTER",
                Severity.ERROR,
                f"The drafter has {layers} decoder layers; {rules.display} builds {rules.max_layers}, so the "
                "rest are dropped or the load fails.",
                engine=rules.name,
                evidence={
                    "num_hidden_layers": configured,
                    "layers_in_keys": ctx.fmt.decoder_layers,
                    "engine_max_layers": rules.max_layers,
                    **ctx.evidence_base(rules.name),
                },
                fix="Serve it on vLLM (multi-layer EAGLE-3) or retrain with one layer.",
            )


def check_vocab_sizes(ctx: Context) -> Iterator[Finding]:
    cfg = ctx.cfg
    v, big_v = cfg.draft_vocab_size, cfg.vocab_size
    h = cfg.hidden_size
    mismatches = []
    lm = ctx.shape("lm_head.weight")
    if lm and v is not None and lm[0] != v:
        mismatches.append(f"lm_head.weight has {lm[0]} rows, draft_vocab_size is {v}")
    d2t = ctx.shape("d2t")
    if d2t and v is not None and d2t[0] != v:
        mismatches.append(f"d2t has {d2t[0]} entries, draft_vocab_size is {v}")
    t2d = ctx.shape("t2d")
    if t2d and big_v is not None and t2d[0] != big_v:
        mismatches.append(f"t2d has {t2d[0]} entries, vocab_size is {big_v}")
    emb = ctx.shape("embed_tokens.weight")
    if emb and big_v is not None and emb[0] != big_v:
        mismatches.append(f"embed_tokens.weight has {emb[0]} rows, vocab_size is {big_v}")
    if v is not None and big_v is not None and v > big_v:
        mismatches.append(f"draft_vocab_size {v} exceeds vocab_size {big_v}")
    if mismatches:
        yield Finding(
            "VOCAB_SIZE_INCONSISTENT",
            Severity.ERROR,
            "; ".join(mismatches) + ".",
            evidence={"problems": mismatches, "draft_vocab_size": v, "vocab_size": big_v},
            fix="Make draft_vocab_size = lm_head rows = len(d2t) and vocab_size = len(t2d) = target vocab; "
            "a mismatch usually means tensors from two different runs.",
        )
    if v is None and lm is not None and big_v is not None and lm[0] < big_v:
        for rules in ctx.engines:
            effect = (
                "borrows the target's lm_head and ignores the trained draft head"
                if rules.missing_draft_vocab_size == "target_head"
                else "assumes draft_vocab_size = vocab_size and fails on the lm_head shape"
            )
            yield Finding(
                "DRAFT_VOCAB_SIZE_MISSING",
                Severity.ERROR,
                f"draft_vocab_size is missing while lm_head has {lm[0]} < {big_v} rows; "
                f"{ENGINES[rules.name].display} {effect}.",
                engine=rules.name,
                evidence={"lm_head_rows": lm[0], "vocab_size": big_v, **ctx.evidence_base(rules.name)},
                fix=f"Set draft_vocab_size = {lm[0]} in config.json.",
            )
    if lm is None and ctx.reduced_vocab:
        for rules in ctx.engines:
            yield Finding(
                "LM_HEAD_MISSING",
                Severity.ERROR,
                f"No lm_head.weight although the draft vocabulary ({ctx.draft_vocab_size}) is smaller "
                f"than the target's ({ctx.target_vocab_size}); {rules.display} cannot borrow a "
                "full-vocabulary head for it.",
                engine=rules.name,
                evidence={
                    "draft_vocab_size": ctx.draft_vocab_size,
                    "vocab_size": ctx.target_vocab_size,
                    **ctx.evidence_base(rules.name),
                },
                fix="Ship the trained [draft_vocab_size, hidden] lm_head.weight.",
            )
    if lm and h is not None and len(lm) == 2 and lm[1] != h:
        yield Finding(
            "VOCAB_SIZE_INCONSISTENT",
            Severity.ERROR,
            f"lm_head.weight is {list(lm)}, its width differs from hidden_size {h}.",
            evidence={"lm_head": list(lm), "hidden_size": h},
            fix="Use the lm_head trained with this drafter.",
        )


def check_tied_embeddings(ctx: Context) -> Iterator[Finding]:
    if ctx.cfg.flag("tie_word_embeddings") is not True or not ctx.reduced_vocab:
        return
    for rules in ctx.engines:
        if not rules.honours_tie_word_embeddings:
            continue
        yield Finding(
            "TIED_EMBEDDINGS_ON_REDUCED_VOCAB",
            Severity.ERROR,
            f"tie_word_embeddings is true: {rules.display} binds lm_head to the embedding, drops the "
            f"trained [{ctx.draft_vocab_size}, H] head and produces {ctx.target_vocab_size}-wide logits "
            "that d2t cannot map.",
            engine=rules.name,
            evidence={
                "tie_word_embeddings": True,
                "draft_vocab_size": ctx.draft_vocab_size,
                "vocab_size": ctx.target_vocab_size,
                "levels": ctx.cfg.where("tie_word_embeddings"),
                **ctx.evidence_base(rules.name),
            },
            fix="Set tie_word_embeddings: false in config.json.",
        )


def check_embeddings(ctx: Context) -> Iterator[Finding]:
    cfg = ctx.cfg
    emb = ctx.shape("embed_tokens.weight")
    h, ht = cfg.hidden_size, cfg.target_hidden_size
    if emb is not None and h is not None and len(emb) == 2 and emb[1] != h:
        yield Finding(
            "EMBED_TOKENS_PROBLEM",
            Severity.ERROR,
            f"embed_tokens.weight is {list(emb)}; its width differs from hidden_size {h}.",
            evidence={"embed_tokens": list(emb), "hidden_size": h},
            fix="Ship the embedding of the target the drafter was trained with, or none.",
        )
    for name, load in ctx.loads.items():
        unfilled_embed = [p for p in load.unfilled if p.endswith("embed_tokens.weight")]
        if unfilled_embed:
            yield Finding(
                "EMBED_TOKENS_PROBLEM",
                Severity.ERROR,
                f"target_hidden_size ({ht}) differs from hidden_size ({h}), so {ENGINES[name].display} "
                "keeps the checkpoint's embedding, and the checkpoint has none: it stays uninitialised.",
                engine=name,
                evidence={"hidden_size": h, "target_hidden_size": ht, **ctx.evidence_base(name)},
                fix="Ship embed_tokens.weight [vocab_size, hidden_size] (the one used in training).",
            )
        if name == "speculators" and emb is None and "embed_tokens.weight" in load.defaulted:
            yield Finding(
                "EMBED_TOKENS_PROBLEM",
                Severity.WARNING,
                "speculators checkpoints carry embed_tokens.weight; this one has none, and the loader "
                "ignores its absence.",
                engine=name,
                evidence={**ctx.evidence_base(name)},
                fix="Ship the verifier's embed_tokens.weight (speculators freezes it by default).",
            )


def check_fc_width(ctx: Context) -> Iterator[Finding]:
    fc = ctx.shape("fc.weight")
    cfg = ctx.cfg
    h = cfg.hidden_size
    ht = cfg.target_hidden_size or h
    if fc is None or len(fc) != 2 or h is None or ht is None:
        return
    for rules in ctx.engines:
        ids, _, _ = aux_ids_read(rules, cfg)
        k = len(ids) if (rules.aux_count_from_ids and ids) else 3
        want = [h, k * ht]
        if list(fc) != want:
            yield Finding(
                "FC_WIDTH_MISMATCH",
                Severity.ERROR,
                f"fc.weight is {list(fc)}; {rules.display} builds fc as {want} "
                f"({k} aux states × target hidden {ht} → hidden {h}) and fails on the shape.",
                engine=rules.name,
                evidence={
                    "fc_shape": list(fc),
                    "expected": want,
                    "aux_states": k,
                    "target_hidden_size": ht,
                    **ctx.evidence_base(rules.name),
                },
                fix="Set target_hidden_size / the aux-layer ids to what the drafter was trained with.",
            )


CHECKS = (
    check_is_eagle3,
    check_config_readable,
    check_key_fates,
    check_layers,
    check_vocab_sizes,
    check_tied_embeddings,
    check_embeddings,
    check_fc_width,
)
