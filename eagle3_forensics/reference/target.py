"""The target side: any local Hugging Face causal LM, with aux hidden-state capture and a KV cache.

**Aux index convention** (the one every id in this package is expressed in): index ``i`` is
the Hugging Face ``output_hidden_states`` index, i.e. the residual stream *entering* decoder
layer ``i`` (``0`` = the embedding output, ``i`` = the output of layer ``i-1``), captured
before the model's final norm. vLLM and speculators ids are these indices as-is; SGLang's
nested ``eagle_config`` ids and SpecForge/TRT-LLM ids are "output of layer ``j``" and equal
index ``j + 1``. Index ``N`` (``N`` = number of layers) is the output of the last layer,
*before* the final norm — unlike the last entry of ``output_hidden_states`` in classic HF
Llama, which is normed — so capture uses forward hooks on the decoder layers rather than
``output_hidden_states``.

Only local files are read (``local_files_only=True``): nothing is fetched from a hub.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from eagle3_forensics.errors import UnusableInputError
from eagle3_forensics.reference.drafter.model import default_dtype, resolve_device


@dataclass
class TargetStep:
    """One target forward: greedy-relevant logits and the requested aux states."""

    logits: torch.Tensor  # [T, V] (float32)
    aux: torch.Tensor | None  # [T, len(aux_ids) * H] in the order asked, or None
    hidden: dict[int, torch.Tensor]  # HF index -> [T, H], every index captured


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No progress bars on stderr while loading (the CLI promises one-line errors)."""
    try:
        from transformers.utils import logging as hf_logging  # optional: transformers (the models extra)
    except ImportError:  # pragma: no cover
        yield
        return
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def _find_layers(model: nn.Module, n: int) -> nn.ModuleList:
    """The decoder-layer list: ``model.model.layers`` for Llama-likes, else the first fitting ModuleList."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if isinstance(layers, nn.ModuleList) and len(layers) == n:
        return layers
    for _, mod in model.named_modules():
        if isinstance(mod, nn.ModuleList) and len(mod) == n:
            return mod
    raise UnusableInputError(f"cannot find the {n} decoder layers of {type(model).__name__}")


class TargetModel:
    """A local causal LM (through transformers) that can hand out aux hidden states.

    ``forward(ids, cache, aux_ids)`` runs new tokens against a KV cache and returns the logits
    and the concatenated aux states of those tokens. The same code path serves the CPU
    (float32) and CUDA (bfloat16 by default).
    """

    def __init__(
        self, path: str | Path, *, device: str | torch.device = "auto", dtype: torch.dtype | None = None
    ) -> None:
        p = Path(path)
        if not p.is_dir():
            raise UnusableInputError(f"target directory not found: {p}", path=str(p))
        if not (p / "config.json").is_file():
            raise UnusableInputError(f"target directory has no config.json: {p}", path=str(p))
        self.device = resolve_device(device)
        self.dtype = dtype or default_dtype(self.device)
        try:
            from transformers import (  # optional: transformers (the models extra)
                AutoModelForCausalLM,
                AutoTokenizer,
            )
        except ImportError as exc:  # pragma: no cover - declared extra
            raise UnusableInputError(
                f"the probe needs transformers (pip install '.[models]'): {exc}"
            ) from None
        try:
            with _quiet_transformers():
                try:
                    model = AutoModelForCausalLM.from_pretrained(
                        str(p), local_files_only=True, dtype=self.dtype
                    )
                except TypeError:  # transformers < 4.56 spells it torch_dtype
                    model = AutoModelForCausalLM.from_pretrained(
                        str(p), local_files_only=True, torch_dtype=self.dtype
                    )
        except Exception as exc:  # transformers raises anything on a mangled config or weights file
            detail = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
            raise UnusableInputError(
                f"cannot load the target model from {p}: {detail}", path=str(p)
            ) from None
        self.model: Any = model.to(self.device).eval()  # type: ignore[arg-type]
        for param in self.model.parameters():
            param.requires_grad_(False)
        self.path = p
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(str(p), local_files_only=True)
        except Exception:  # a missing or mangled tokenizer: the probe then needs token-id prompts
            self.tokenizer = None
        cfg = self.model.config
        text = getattr(cfg, "text_config", None) or cfg
        archs = getattr(self.model.config, "architectures", None) or []
        self.architecture: str | None = str(archs[0]) if archs else None  # picks the engines' aux rule
        self.num_layers = int(text.num_hidden_layers)
        self.hidden_size = int(text.hidden_size)
        self.vocab_size = int(text.vocab_size)
        positions = getattr(text, "max_position_embeddings", None)
        self.max_positions: int | None = (
            int(positions) if isinstance(positions, int) and positions > 0 else None
        )
        self._layers = _find_layers(self.model, self.num_layers)
        self._want: set[int] = set()
        self._got: dict[int, torch.Tensor] = {}
        for i, layer in enumerate(self._layers):
            layer.register_forward_pre_hook(self._pre_hook(i), with_kwargs=True)
        self._layers[-1].register_forward_hook(self._post_hook(self.num_layers))
        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"

    # -- hooks: HF index i = input of layer i; index N = output of the last layer (pre-norm) --------
    def _pre_hook(self, index: int) -> Any:
        def hook(_mod: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if index in self._want:
                hs = args[0] if args else kwargs["hidden_states"]
                self._got[index] = hs[0].detach()

        return hook

    def _post_hook(self, index: int) -> Any:
        def hook(_mod: nn.Module, _args: Any, output: Any) -> None:
            if index in self._want:
                hs = output[0] if isinstance(output, tuple) else output
                self._got[index] = hs[0].detach()

        return hook

    # -- TargetSide protocol ---------------------------------------------------------------------
    def embedding_weight(self) -> torch.Tensor | None:
        emb = self.model.get_input_embeddings()
        return None if emb is None else emb.weight.detach().float().cpu()

    def lm_head_weight(self) -> torch.Tensor | None:
        head = self.model.get_output_embeddings()
        return None if head is None else head.weight.detach().float().cpu()

    # -- running ---------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        if self.tokenizer is None:
            raise UnusableInputError(f"the target at {self.path} has no tokenizer (tokenizer.json)")
        ids = list(self.tokenizer(text)["input_ids"])
        if not ids:
            raise UnusableInputError(f"prompt {text[:40]!r} tokenizes to nothing")
        return [int(i) for i in ids]

    def new_cache(self) -> Any:
        from transformers import DynamicCache  # optional: transformers (the models extra)

        try:
            return DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            return DynamicCache()

    @staticmethod
    def cache_length(cache: Any) -> int:
        return int(cache.get_seq_length())

    @staticmethod
    def crop(cache: Any, length: int) -> None:
        """Drop cached positions ``>= length`` (the rejected drafts)."""
        remove = int(cache.get_seq_length()) - length
        if remove > 0:
            cache.crop(-remove)

    @torch.inference_mode()
    def forward(
        self,
        ids: Sequence[int] | torch.Tensor,
        cache: Any = None,
        aux_ids: Sequence[int] = (),
        all_hidden: bool = False,
    ) -> TargetStep:
        """Run ``ids`` (new tokens) after whatever ``cache`` holds; capture ``aux_ids`` (HF index)."""
        x = ids if isinstance(ids, torch.Tensor) else torch.tensor(list(ids), dtype=torch.long)
        x = x.to(self.device).view(1, -1)
        want = set(range(self.num_layers + 1)) if all_hidden else set(aux_ids)
        bad = [i for i in want if not 0 <= i <= self.num_layers]
        if bad:
            raise UnusableInputError(f"aux layer id {bad[0]} outside 0..{self.num_layers} for this target")
        self._want, self._got = want, {}
        try:
            kwargs: dict[str, Any] = {"input_ids": x, "use_cache": cache is not None}
            if cache is not None:
                kwargs[self._cache_kw] = cache
            out = self.model(**kwargs)
        finally:
            self._want = set()
        hidden, self._got = self._got, {}
        aux = torch.cat([hidden[i] for i in aux_ids], dim=-1) if aux_ids else None
        return TargetStep(out.logits[0].float(), aux, hidden)

    def greedy(self, prompt: Sequence[int], max_new_tokens: int) -> list[int]:
        """Plain greedy decoding with the KV cache, one token per forward (EOS ignored)."""
        cache = self.new_cache()
        step = self.forward(prompt, cache)
        out = [int(step.logits[-1].argmax())]
        while len(out) < max_new_tokens:
            step = self.forward([out[-1]], cache)
            out.append(int(step.logits[-1].argmax()))
        return out
