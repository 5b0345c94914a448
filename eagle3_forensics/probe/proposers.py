"""What drafts tokens for the live chain: the reference EAGLE-3 drafter and two controls.

A :class:`Proposer` drafts target token ids; :func:`~eagle3_forensics.probe.decode.speculative_decode`
verifies them. :class:`OracleProposer` (acceptance length K+1) and :class:`RandomProposer`
(acceptance length about 1) bracket what a real drafter can reach.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import torch

if TYPE_CHECKING:
    from eagle3_forensics.reference.drafter.model import Eagle3Drafter


class Proposer(Protocol):
    """Something that drafts target token ids for the chain (``-1`` = no valid proposal)."""

    aux_ids: list[int]

    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None: ...

    def propose(self, k: int) -> list[int]: ...

    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None: ...


class Eagle3Proposer:
    """Chain drafting with :class:`~eagle3_forensics.reference.drafter.Eagle3Drafter` and its KV cache."""

    def __init__(self, drafter: Eagle3Drafter, target_vocab_size: int) -> None:
        self.drafter = drafter
        self.aux_ids = list(drafter.aux_ids)
        self.vocab = target_vocab_size
        self.map: list[int] = drafter.target_ids().tolist()
        self.cache = drafter.new_cache()
        self.n = 0  # stable slots = committed tokens whose target features the drafter has seen
        self.last: torch.Tensor | None = None
        self.dev = drafter.device

    def _ids(self, ids: Sequence[int]) -> torch.Tensor:
        return torch.tensor(list(ids), dtype=torch.long, device=self.dev)

    @torch.inference_mode()
    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None:
        assert aux is not None
        n = len(prompt)
        self.cache = self.drafter.new_cache()
        # feature of position t is paired with token t+1; the last slot gets the bonus token
        out = self.drafter.extend(
            self._ids([*prompt[1:], bonus]),
            self.drafter.fuse(aux),
            torch.arange(n, device=self.dev),
            self.cache,
        )
        self.last, self.n = out[-1:], n

    @torch.inference_mode()
    def propose(self, k: int) -> list[int]:
        assert self.last is not None
        h = self.last
        drafts: list[int] = []
        for j in range(k):
            d = int(self.drafter.logits(h[-1]).argmax())
            t = self.map[d]
            if not 0 <= t < self.vocab:  # e.g. an absolute-id d2t: no such target token
                break
            drafts.append(t)
            if j == k - 1:
                break
            h = self.drafter.extend(
                self._ids([t]),
                self.drafter.feedback(h),
                torch.tensor([self.n + j], device=self.dev),
                self.cache,
            )
        self.cache.truncate(self.n)
        return drafts + [-1] * (k - len(drafts))

    @torch.inference_mode()
    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None:
        assert aux is not None
        m = len(committed)
        out = self.drafter.extend(
            self._ids(committed),
            self.drafter.fuse(aux),
            torch.arange(self.n, self.n + m, device=self.dev),
            self.cache,
        )
        self.last, self.n = out[-1:], self.n + m


class OracleProposer:
    """Control: proposes the target's own greedy continuation (acceptance length must be K+1)."""

    def __init__(self, continuations: Sequence[Sequence[int]]) -> None:
        self.aux_ids: list[int] = []
        self._conts = [list(c) for c in continuations]
        self._i = -1
        self._pos = 0

    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None:
        self._i += 1
        self._pos = 1  # index in the continuation of the next token to propose

    def propose(self, k: int) -> list[int]:
        cont = self._conts[self._i]
        out = cont[self._pos : self._pos + k]
        return out + [-1] * (k - len(out))

    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None:
        self._pos += len(committed)


class RandomProposer:
    """Control: uniform random target ids (acceptance length ≈ 1)."""

    def __init__(self, vocab_size: int, seed: int = 0) -> None:
        self.aux_ids: list[int] = []
        self.vocab = vocab_size
        self.g = torch.Generator().manual_seed(seed)

    def start(self, prompt: list[int], aux: torch.Tensor | None, bonus: int) -> None:
        return None

    def propose(self, k: int) -> list[int]:
        return [int(x) for x in torch.randint(0, self.vocab, (k,), generator=self.g)]

    def accept(self, committed: list[int], aux: torch.Tensor | None) -> None:
        return None
