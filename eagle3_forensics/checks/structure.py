"""Checks on the key layout, the config and what each engine would load."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

from eagle3_forensics.checks.context import Context
from eagle3_forensics.engines import releases_building
from eagle3_forensics.engines.rules import EngineRules, Fill, MissingDraftVocab, OverLimit
from eagle3_forensics.engines.simulate import (
    LoadReport,
    buffer_count,
    fc_count,
    fc_input_width,
    loadable_spelling,
)
from eagle3_forensics.findings import Finding, Severity
from eagle3_forensics.io.layout import is_drafter_weight

_MAX_LISTED = 40


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
    for rules in ctx.engines:
        load = ctx.loads[rules.name]
        if load.config_readable:
            continue
        # An engine that never reads this config layout (speculators vs a flat EAGLE config) is not a
        # target of this drafter unless the user named it: then it is an error, otherwise information.
        foreign = ctx.cfg.style not in rules.config_styles
        severity = Severity.INFO if foreign and not ctx.explicit_engines else Severity.ERROR
        yield Finding(
            "CONFIG_UNREADABLE_BY_ENGINE",
            severity,
            f"{rules.display} ({rules.release}) cannot use this config: {load.config_problem}.",
            engine=rules.name,
            evidence={
                "problem": load.config_problem,
                "config_style": ctx.cfg.style,
                "architectures": ctx.cfg.architectures,
                "drafter_class": rules.drafter_class,
                **ctx.evidence_base(rules.name),
            },
            fix=_with_paths(rules.config_fix, ctx),
        )


def _with_paths(text: str, ctx: Context) -> str:
    """A release table's conversion command with this run's paths for its placeholders: ``SRC`` the
    drafter, ``DST`` a sibling ``<drafter>-converted``, ``TARGET`` the target when one was given."""
    paths = {"SRC": str(ctx.ckpt.path), "DST": f"{ctx.ckpt.path}-converted"}
    if ctx.target is not None:
        paths["TARGET"] = str(ctx.target.path)
    return re.sub(r"\b(SRC|DST|TARGET)\b", lambda m: shlex.quote(paths.get(m.group(1), m.group(1))), text)


def check_key_fates(ctx: Context) -> Iterator[Finding]:
    """What each engine does with the checkpoint's keys: drops, refuses, fails to load, leaves unfilled."""
    for rules in ctx.engines:
        load = ctx.loads[rules.name]
        yield from _dropped_keys(ctx, rules, load)
        yield from _rejected_keys(ctx, rules, load)
        yield from _load_errors(ctx, rules, load)
        yield from _unfilled_params(ctx, rules, load)


def _dropped_keys(ctx: Context, rules: EngineRules, load: LoadReport) -> Iterator[Finding]:
    """KEYS_DROPPED_BY_ENGINE: keys the engine drops or ignores (an error when they are trained weights)."""
    name = rules.name
    dropped = load.keys_with("dropped", "warned")
    if dropped:
        # A full-vocabulary drafter needs no map: an engine that deletes its d2t/t2d buffers loses nothing.
        harmless = set() if ctx.reduced_vocab else {"d2t", "t2d"}
        trained = [k for k in dropped if is_drafter_weight(k) and k.removeprefix("model.") not in harmless]
        verb = "ignores with a warning" if rules.unknown_keys == "warn" else "silently drops"
        layout = ctx.fmt.key_layout
        renames = {k: alt for k in trained if (alt := loadable_spelling(rules, ctx.ckpt, ctx.cfg, k))}
        fix = None
        if renames:
            first, alt = next(iter(renames.items()))
            fix = (
                f"Rename {first} to {alt}"
                + (f" (and {len(renames) - 1} more the same way)" if len(renames) > 1 else "")
                + f": the names {rules.display} ({rules.release}) loads, in a copy of the checkpoint."
            )
        elif trained:
            fix = "Rename them to the engine's names (see the load report), or serve on an engine that uses them."
        yield Finding(
            "KEYS_DROPPED_BY_ENGINE",
            Severity.ERROR if trained else Severity.INFO,
            f"{rules.display} ({rules.release}) {verb} {len(dropped)} tensor(s)"
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
                "loadable_as": dict(list(renames.items())[:_MAX_LISTED]),
                **ctx.evidence_base(name),
            },
            fix=fix,
        )


def _rejected_keys(ctx: Context, rules: EngineRules, load: LoadReport) -> Iterator[Finding]:
    """KEYS_REJECTED_BY_ENGINE: keys the engine refuses (loading fails)."""
    name = rules.name
    rejected = load.keys_with("rejected")
    if rejected:
        notes = {f.key: f.note for f in load.fates if f.action == "rejected"}
        yield Finding(
            "KEYS_REJECTED_BY_ENGINE",
            Severity.ERROR,
            f"{rules.display} ({rules.release}) refuses to load {len(rejected)} tensor(s) "
            f"(e.g. {rejected[0]!r}: {notes[rejected[0]]}); loading fails.",
            engine=name,
            evidence={
                "rejected": _listed(rejected),
                "count": len(rejected),
                "reasons": {k: notes[k] for k in rejected[:_MAX_LISTED]},
                **ctx.evidence_base(name),
            },
            fix="Remove them, or rename them to the engine's names (see the load report), in a copy of the checkpoint.",
        )


def _load_errors(ctx: Context, rules: EngineRules, load: LoadReport) -> Iterator[Finding]:
    """The load errors the simulator found (a missing or malformed tensor the engine needs)."""
    name = rules.name
    for code, what, fix in load.load_errors:
        chance = (
            " (unless uninitialised memory happens to hold a valid value)"
            if load.load_errors_by_chance
            else ""
        )
        yield Finding(
            code,
            Severity.ERROR,
            f"{rules.display} ({rules.release}) fails to load this drafter{chance}: {what}.",
            engine=name,
            evidence={
                "stage": "load",
                "by_chance": load.load_errors_by_chance,
                **ctx.evidence_base(name),
            },
            fix=fix or "Provide the tensor the engine needs.",
        )


def _unfilled_params(ctx: Context, rules: EngineRules, load: LoadReport) -> Iterator[Finding]:
    """PARAMS_UNFILLED: parameters (or stacked shards) no tensor fills."""
    name = rules.name
    if (load.unfilled or load.partial) and load.config_readable:
        unused_loaded = [f.key for f in load.fates if f.param in load.loaded_unused]
        partial = [f"{p} (no {', '.join(missing)})" for p, missing in load.partial.items()]
        message = (
            f"{len(load.unfilled)} {rules.display} ({rules.release}) parameter(s) get no tensor from this "
            f"checkpoint and stay at initialisation (e.g. {load.unfilled[0]!r})."
            if load.unfilled
            else ""
        )
        if partial:
            message += (
                f"{' ' if message else ''}{len(partial)} stacked parameter(s) get only some of their shards; "
                f"the missing slices stay at initialisation (e.g. {partial[0]})."
            )
        yield Finding(
            "PARAMS_UNFILLED",
            Severity.ERROR,
            message,
            engine=name,
            evidence={
                "unfilled": _listed(load.unfilled),
                "count": len(load.unfilled),
                "partially_filled": _listed(partial),
                # loaded into parameters the engine never uses (e.g. SGLang's input_layernorm of layers >= 1)
                "loaded_but_unused": _listed(unused_loaded),
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
        if rules.max_layers is None or layers <= rules.max_layers:
            continue
        loud = rules.over_max is OverLimit.BUILD_ERROR and configured > rules.max_layers
        effect = (
            "its constructor raises at start-up"
            if loud
            else f"the other {layers - rules.max_layers} are dropped (or their keys rejected)"
        )
        builders = releases_building(layers)
        yield Finding(
            "MULTI_LAYER_DRAFTER",
            Severity.ERROR,
            f"The drafter has {layers} decoder layers; {rules.display} ({rules.release}) builds "
            f"{rules.max_layers}: {effect}.",
            engine=rules.name,
            evidence={
                "num_hidden_layers": configured,
                "layers_in_keys": ctx.fmt.decoder_layers,
                "engine_max_layers": rules.max_layers,
                "loud": loud,
                "releases_building_it": builders,
                **ctx.evidence_base(rules.name),
            },
            fix=f"Serve it on a release that builds {layers} layers ({', '.join(builders)}), or retrain with one layer."
            if builders
            else "Retrain with one layer.",
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
        present = bool(cfg.fields.get("draft_vocab_size"))
        for rules in ctx.engines:
            how = rules.null_draft_vocab_size if present else rules.missing_draft_vocab_size
            effect = _DRAFT_VOCAB_EFFECT[how]
            yield Finding(
                "DRAFT_VOCAB_SIZE_MISSING",
                Severity.ERROR,
                f"draft_vocab_size is {'null' if present else 'missing'} while lm_head has {lm[0]} < {big_v} rows; "
                f"{rules.display} ({rules.release}) {effect}.",
                engine=rules.name,
                evidence={
                    "lm_head_rows": lm[0],
                    "vocab_size": big_v,
                    "key_present": present,
                    "engine_behaviour": how.value,
                    **ctx.evidence_base(rules.name),
                },
                fix=f"Set draft_vocab_size = {lm[0]} in config.json.",
            )
    if lm is None and ctx.reduced_vocab:
        for rules in ctx.engines:
            head = ctx.loads[rules.name].param_fates.get("lm_head.weight")
            if head in ("from_target",):
                effect = (
                    f"shares the target's [{ctx.target_vocab_size}, H] lm_head, whose logits do not fit the "
                    f"{ctx.draft_vocab_size}-entry draft map (a shape error at the first draft step, read from the code)"
                )
            elif head == "verifier_if_nan":
                effect = "leaves lm_head as uninitialised memory (copied from the verifier only when it happens to be NaN)"
            else:
                effect = "cannot borrow a full-vocabulary head for it: lm_head stays uninitialised"
            yield Finding(
                "LM_HEAD_MISSING",
                Severity.ERROR,
                f"No lm_head.weight although the draft vocabulary ({ctx.draft_vocab_size}) is smaller "
                f"than the target's ({ctx.target_vocab_size}); {rules.display} ({rules.release}) {effect}.",
                engine=rules.name,
                evidence={
                    "draft_vocab_size": ctx.draft_vocab_size,
                    "vocab_size": ctx.target_vocab_size,
                    "engine_lm_head": head,
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
            f"tie_word_embeddings is true: {rules.display} ({rules.release}) binds lm_head to the embedding, drops the "
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
    for rules in ctx.engines:
        load = ctx.loads[rules.name]
        unfilled_embed = [p for p in load.unfilled if p.endswith("embed_tokens.weight")]
        if unfilled_embed:
            yield Finding(
                "EMBED_TOKENS_PROBLEM",
                Severity.ERROR,
                f"target_hidden_size ({ht}) differs from hidden_size ({h}), so {rules.display} ({rules.release}) "
                "keeps the checkpoint's embedding, and the checkpoint has none: it stays uninitialised.",
                engine=rules.name,
                evidence={"hidden_size": h, "target_hidden_size": ht, **ctx.evidence_base(rules.name)},
                fix="Ship embed_tokens.weight [vocab_size, hidden_size] (the one used in training).",
            )
        by_chance = [p for p in load.by_chance if p.endswith("embed_tokens.weight")]
        if by_chance and emb is None:
            yield Finding(
                "EMBED_TOKENS_PROBLEM",
                Severity.ERROR,
                f"No embed_tokens.weight: {rules.display} ({rules.release}) leaves the embedding as freshly "
                "allocated memory and copies the verifier's only when that memory happens to be NaN, which "
                "under Transformers 5 it is not (seen: exact copies, ~1e21 values or zeros across identical runs).",
                engine=rules.name,
                evidence={
                    "embed_tokens": None,
                    "engine_fill": Fill.VERIFIER_IF_NAN.value,
                    **ctx.evidence_base(rules.name),
                },
                fix="Ship the verifier's embed_tokens.weight (speculators freezes it by default).",
            )


def check_fc_width(ctx: Context) -> Iterator[Finding]:
    fc = ctx.shape("fc.weight")
    cfg = ctx.cfg
    h = cfg.hidden_size
    if fc is None or len(fc) != 2 or h is None:
        return
    for rules in ctx.engines:
        width = fc_input_width(rules, cfg)
        if width is None or not any(p.endswith("fc.weight") for p in ctx.loads[rules.name].param_fates):
            continue  # the engine builds no fc for this config (use_aux_hidden_state: false on vLLM)
        k, source = fc_count(rules, cfg)
        want = [h, k * width]
        evidence = {
            "fc_shape": list(fc),
            "expected": want,
            "aux_states": k,
            "aux_states_from": source,
            "aux_state_width": width,
            **ctx.evidence_base(rules.name),
        }
        if list(fc) != want:
            yield Finding(
                "FC_WIDTH_MISMATCH",
                Severity.ERROR,
                f"fc.weight is {list(fc)}; {rules.display} ({rules.release}) builds fc as {want} "
                f"({k} aux states from {source} × width {width} → hidden {h}) and fails on the shape.",
                engine=rules.name,
                evidence=evidence,
                fix="Write the aux-state count the drafter was trained with where this engine reads it "
                f"({' or '.join(s.value for s in rules.fc_count_from) or 'nowhere: it always takes 3'}) "
                "and target_hidden_size if the target is wider.",
            )
            continue
        buffer = buffer_count(rules, cfg)
        if buffer is not None and buffer[0] != k:
            yield Finding(
                "FC_WIDTH_MISMATCH",
                Severity.WARNING,
                f"{rules.display} ({rules.release}) sizes the draft-input buffer for {buffer[0]} aux states "
                f"(from {buffer[1]}) but fc takes {k}: the widths disagree at the first draft step "
                "(read from the code, not run).",
                engine=rules.name,
                evidence={**evidence, "buffer_aux_states": buffer[0], "buffer_from": buffer[1]},
                fix="Make the aux ids and num_aux_hidden_states agree (remove the stray top-level ids or write them nested).",
            )


_DRAFT_VOCAB_EFFECT = {
    MissingDraftVocab.BUILD_ERROR: "fails at start-up (AttributeError: the key is read unconditionally)",
    MissingDraftVocab.TARGET_HEAD: "borrows the target's lm_head and ignores the trained draft head",
    MissingDraftVocab.VOCAB_SIZE: "assumes draft_vocab_size = vocab_size and fails on the lm_head shape",
    MissingDraftVocab.DEFAULT_32000: "assumes its default 32000 and fails on the lm_head shape",
}


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
