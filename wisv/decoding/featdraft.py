"""An EAGLE-style draft head on the UE that reads the target's features sent down the link (Li et al., EAGLE, 2024).

The head predicts the target's next final-layer (post-norm) hidden state, its *feature*, and reads the token from it
with a copy of the target's LM head.  At a sequence position p its input is ``fc([f_{p-1} ; e(x_p)])``: the feature
that produced token x_p (the target's, where a VERDICT brought it; else the head's own prediction) beside x_p's
embedding (a copy of the target's); one or two causal decoder layers over the last ``window`` positions give
``f^_p``, and ``lm_head(f^_p)`` the next token.  Drafting a block runs it autoregressively: from the target's feature
of the last VERDICT and its next token, then on its own predicted features.

``FeatureDraftSession`` is a ``DraftSession`` (so every chain protocol drafts with it); its ``Draft.hidden``, what
fh and sh upload as the "drafter's hidden states", are the head's own predicted features [K, d_t].  Before the first
feature arrives (a session's first block) the head starts from a zero feature, as it was trained to.
"""
from __future__ import annotations

import hashlib
import json
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from transformers import PreTrainedModel

from wisv.decoding.rejection import draft_features
from wisv.decoding.sessions import Draft, DraftSession, common_len
from wisv.models.loader import load_model
from wisv.models.restricted_head import RestrictedHead


@dataclass(frozen=True)
class FeatureHeadConfig:
    """Shape of a feature head."""

    d_t: int  # the target's hidden width: features, embedding and LM head
    vocab: int  # the target's vocabulary size
    n_layers: int = 1  # decoder layers over [feature ; embedding]
    n_heads: int = 4  # attention heads (d_t must divide by it)
    d_ff: int = 0  # MLP width (0: 2 * d_t)
    window: int = 64  # positions a layer attends to (training and drafting alike); no positional encoding
    eps: float = 1e-6  # RMSNorm epsilon


class _Layer(nn.Module):
    """Pre-norm causal self-attention (no positional encoding) and a SiLU-gated MLP."""

    def __init__(self, c: FeatureHeadConfig):
        super().__init__()
        d, ff = c.d_t, c.d_ff or 2 * c.d_t
        self.h, self.window = c.n_heads, c.window
        self.n1, self.n2 = nn.RMSNorm(d, eps=c.eps), nn.RMSNorm(d, eps=c.eps)
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None, keep: int = 0
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x [B, T, d] after ``past`` (k, v [B, h, P, d/h]); returns [B, T, d] and the (k, v) to pass on: the last
        ``keep`` positions' (0: window - 1, the keys a next position can still see)."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)  # 3 x [B, h, T, dh]
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        n = k.shape[2]  # P + T keys
        i = torch.arange(n - t, n, device=x.device)[:, None]  # [T, 1] query positions
        j = torch.arange(n, device=x.device)[None, :]  # [1, P + T] key positions
        allowed = (j <= i) & (i - j < self.window)  # [T, P + T] causal, within the window
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)  # [B, h, T, dh]
        x = x + self.o(a.transpose(1, 2).reshape(b, t, d))
        h = self.n2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        keep = keep or self.window - 1
        return x, (k[:, :, -keep:], v[:, :, -keep:])


class FeatureHead(nn.Module):
    """fc([f ; e(x)]) -> decoder layer(s) -> predicted feature f^ -> the target's LM head."""

    def __init__(self, c: FeatureHeadConfig):
        super().__init__()
        self.cfg = c
        self.embed = nn.Embedding(c.vocab, c.d_t)  # a frozen copy of the target's
        self.lm_head = nn.Linear(c.d_t, c.vocab, bias=False)  # a frozen copy of the target's
        self.fc = nn.Linear(2 * c.d_t, c.d_t, bias=False)
        self.layers = nn.ModuleList(_Layer(c) for _ in range(c.n_layers))

    def forward(self, feats: torch.Tensor, tokens: torch.Tensor, past: list | None = None, keep: int = 0
                ) -> tuple[torch.Tensor, list]:
        """feats [B, T, d_t] (f_{p-1}), tokens [B, T] (x_p) -> predicted features [B, T, d_t] (f^_p), new past (the
        last ``keep`` positions' keys and values; 0: window - 1)."""
        x = self.fc(torch.cat([feats, self.embed(tokens)], dim=-1))  # [B, T, d_t]
        new = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, None if past is None else past[i], keep)
            new.append(kv)
        return x, new

    @classmethod
    def from_target(cls, target: PreTrainedModel, **shape) -> FeatureHead:
        """A fresh head with frozen copies of ``target``'s input embedding and LM head."""
        c = target.config
        head = cls(FeatureHeadConfig(d_t=c.hidden_size, vocab=c.vocab_size, **shape))
        with torch.no_grad():
            head.embed.weight.copy_(target.get_input_embeddings().weight.float())
            head.lm_head.weight.copy_(target.get_output_embeddings().weight.float())
        head.embed.weight.requires_grad_(False)
        head.lm_head.weight.requires_grad_(False)
        return head


FROZEN = ("embed.weight", "lm_head.weight")  # the copies of the target's, left out of head.pt


def embedding_digest(weight: torch.Tensor) -> str:
    """sha256 of an embedding matrix's float32 bytes: which target (or early-exit drafter) a head was trained on."""
    return hashlib.sha256(weight.detach().float().contiguous().numpy().tobytes()).hexdigest()


def save_head(head: FeatureHead, path: Path | str, meta: dict | None = None,
              base: PreTrainedModel | None = None) -> None:
    """Write ``head.pt`` (the trained weights in float16, frozen copies as they are) and ``head.json`` (its config,
    ``meta``, and the frozen copies' provenance) into the directory ``path``.  The embedding is left out where
    ``base``, the drafter the UE will run beside the head, has the same one (an early-exit drafter of the target:
    ``load_head`` takes it from there and checks its digest); the LM head is left out where it is tied to the
    embedding.  On SmolLM2 a head is then 8 MB instead of 232 MB."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    emb = head.embed.weight.detach()
    shared = base is not None and tuple(base.get_input_embeddings().weight.shape) == tuple(emb.shape) and \
        torch.equal(base.get_input_embeddings().weight.detach().float(), emb.float())
    tied = torch.equal(emb, head.lm_head.weight.detach())
    drop = {k for k, left in zip(FROZEN, (shared, tied)) if left}
    state = {k: v if k in FROZEN else v.half() for k, v in head.state_dict().items() if k not in drop}  # trained: fp16
    torch.save(state, out / "head.pt")
    frozen = {"embedding": "the drafter's" if shared else "in head.pt", "lm_head": "tied" if tied else "in head.pt",
              "embedding_sha256": embedding_digest(emb)}
    (out / "head.json").write_text(json.dumps({"config": asdict(head.cfg), "frozen": frozen, "meta": meta or {}},
                                              indent=1))


def read_head_config(path: Path | str) -> dict:
    """head.json of a feature head directory (checks both files are there); raises FileNotFoundError / ValueError."""
    src = Path(path)
    if not ((src / "head.json").is_file() and (src / "head.pt").is_file()):
        raise FileNotFoundError(f"{src}: not a feature head directory (head.json and head.pt, written by "
                                "python -m scripts.train.feature_drafter)")
    try:
        doc = json.loads((src / "head.json").read_text())
        FeatureHeadConfig(**doc["config"])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ValueError(f"{src}/head.json: not a feature head's ({e})") from e
    return doc


def load_head(path: Path | str, base: PreTrainedModel | None = None) -> FeatureHead:
    """A head written by ``save_head`` (weights only: ``torch.load(weights_only=True)``), in eval mode, float32.

    Where the head left its embedding out, ``base`` (the UE's drafter) gives it, and must have the very embedding the
    head was trained with (its digest is checked).  A tied LM head is the embedding itself (one matrix in memory)."""
    doc = read_head_config(path)
    head = FeatureHead(FeatureHeadConfig(**doc["config"]))
    state = {k: v.float() for k, v in torch.load(Path(path) / "head.pt", map_location="cpu", weights_only=True).items()}
    if FROZEN[0] not in state:
        if base is None:
            raise ValueError(f"{path}: this feature head takes its embedding from the drafter it was trained beside")
        emb = base.get_input_embeddings().weight.detach()
        if emb.dtype != torch.float32:
            raise ValueError(f"{path}: the drafter beside it must be float32 while the head loads (its embedding's "
                             f"digest is checked), not {emb.dtype}; cast_beside_head casts the drafter after")
        if tuple(emb.shape) != (head.cfg.vocab, head.cfg.d_t) or \
                embedding_digest(emb) != doc.get("frozen", {}).get("embedding_sha256"):
            raise ValueError(f"{path}: trained beside another embedding than this drafter's (head.json frozen."
                             "embedding_sha256); use the pair it was trained on")
        state[FROZEN[0]] = emb
    tied = FROZEN[1] not in state
    if tied:
        state[FROZEN[1]] = state[FROZEN[0]]
    head.load_state_dict(state)
    if tied:  # one matrix, not two copies, in the UE's memory
        head.lm_head.weight = head.embed.weight
    head.embed.weight.requires_grad_(False)
    return head.to(base.device if base is not None else "cpu").eval()  # beside the drafter that feeds it


def load_with_head(drafter_dir: Path, device: str, dtype: torch.dtype,
                   head_dir: Path | str | None) -> tuple[PreTrainedModel, FeatureHead | None]:
    """The UE's drafter with its weights in ``dtype`` and, given ``head_dir``, the feature head beside it
    (``cast_beside_head``).  The drafter's precision moves only what it proposes."""
    drafter = load_model(Path(drafter_dir), "drafter", device, torch.float32 if head_dir else dtype)
    return drafter, cast_beside_head(drafter, head_dir, dtype)


def cast_beside_head(drafter: PreTrainedModel, head_dir: Path | str | None,
                     dtype: torch.dtype) -> FeatureHead | None:
    """The feature head at ``head_dir`` (None: none), built beside the float32 ``drafter`` (load_head checks that
    embedding's digest, and keeps it: the head's inputs stay float32); then the drafter is cast to ``dtype``."""
    head = load_head(head_dir, drafter) if head_dir else None
    drafter.to(dtype)
    return head


def draft_lm_head(head: FeatureHead, model: PreTrainedModel) -> nn.Module:
    """What reads a token from a predicted feature while drafting: the drafter's ``RestrictedHead`` where its rows are
    the head's LM head's own at its kept ids (an early-exit drafter of the target; n_kept rows instead of the whole
    vocabulary, and the drafter's tokens: no excluded id is ever proposed), else the head's LM head.  The check
    (~80 ms on SmolLM2) runs once per head and drafter module."""
    lm = model.get_output_embeddings()
    seen = _DRAFT_LM.setdefault(head, weakref.WeakKeyDictionary())
    if lm not in seen:
        seen[lm] = _same_rows(head, lm)
    return lm if seen[lm] else head.lm_head


_DRAFT_LM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # head -> {drafter's LM head: same rows}


def _same_rows(head: FeatureHead, lm: nn.Module) -> bool:
    """Whether ``lm`` is a RestrictedHead whose rows are the head's LM head's at its kept ids."""
    if not (isinstance(lm, RestrictedHead) and lm.vocab_size == head.cfg.vocab and lm.in_features == head.cfg.d_t):
        return False
    ids = lm.kept_ids.to(head.lm_head.weight.device)  # compared in the drafter's precision: a cast drafter's rows too
    return torch.equal(lm.weight.detach().to(ids.device), head.lm_head.weight.detach()[ids].to(lm.weight.dtype))


class FeatureDraftSession(DraftSession):
    """A DraftSession whose blocks come from a FeatureHead fed with the target's features (``take_features``).

    The head's keys and values of committed positions are kept from one block to the next (``cache_rounds``), so a
    block feeds only the positions committed since the last one, not the whole window again: a position's keys and
    values are fixed once its input (the feature before it and its token) is.  For a head of one layer (the shipped
    one) the drafts are those of a recompute over the window; in a deeper head an earlier position keeps the keys it
    saw when it was fed, as in training's later positions."""

    reads_features = 1  # target-feature rows it asks for per VERDICT (feature_rows sets it per session)
    prefill_pending = False  # its head reads a window of bounded length, never the whole prompt, ahead of a draft

    def __init__(self, model: PreTrainedModel, prompt_ids: list[int], head: FeatureHead, hidden_layer: int = -1,
                 cache_rounds: bool = True, feature_rows: int = 1):
        super().__init__(model, prompt_ids, hidden_layer)  # the drafter model: its config, the tree protocol's drafts
        if head.cfg.vocab != model.config.vocab_size:
            raise ValueError(f"feature head vocabulary {head.cfg.vocab} != the drafter's {model.config.vocab_size}")
        if feature_rows < 1:
            raise ValueError(f"feature_rows must be >= 1, got {feature_rows}")
        self.reads_features = feature_rows  # the target's rows per VERDICT: the newest, or every committed position's
        self.head = head
        self.device = head.embed.weight.device  # where its inputs are made: the head's (and the drafter's) device
        self.lm = draft_lm_head(head, model)  # the drafter's restricted head where it is the same rows: cheaper
        self.feats: dict[int, torch.Tensor] = {}  # best known feature [d_t] at a sequence position (target's, else own)
        self.cache_rounds = cache_rounds  # keep the head's keys and values of committed positions between blocks
        self.kv: list | None = None  # per layer (k, v) of the positions up to kv_end, their inputs final
        self.kv_end = -1  # the last sequence position in kv
        self.fed_end = -1  # the last position the last block fed to the head (kv covers up to it after draft)

    @property
    def hidden_size(self) -> int:
        """Its drafts' hidden states are predicted target features: the target's width."""
        return self.head.cfg.d_t

    def take_features(self, f: torch.Tensor) -> None:
        """The target's features [n, d_t] at the last n committed positions but the newest (a VERDICT's)."""
        end = len(self.seq) - 1  # the newest committed token has no feature yet: the target has not read it
        for i in range(f.shape[0]):
            self.feats[end - f.shape[0] + i] = f[i].float().to(self.device)
        self._trim_kv(end - f.shape[0])  # a cached position fed the head's own feature where the target's came now

    @torch.no_grad()
    def draft(self, k: int, *, sample: bool = False, temperature: float = 1.0,
              generator: torch.Generator | None = None, eos_token_id: int | None = None,
              stop: Callable[[torch.Tensor], bool] | None = None, features: bool = True) -> Draft:
        """Up to ``k`` tokens after ``seq`` from the head (as DraftSession.draft: sampled for reject, ``stop`` asked
        about every token after the first, ``features`` False skips unread predictor features).  Draft.hidden
        [K, d_t]: the predicted feature that gave each token."""
        features = features or stop is not None
        self.carry = None  # the head drafts no proactive tokens to carry
        f_in, x_in, past = self._inputs()  # the positions not in the kept cache (all of the window without it)
        toks, probs, hids, feats = [], [], [], []
        calls = 0
        for _ in range(k):  # the block's positions stay in the past too: they are trimmed back after the VERDICT
            f_hat, past = self.head(f_in, x_in, past, keep=self.head.cfg.window - 1 + k)
            calls += 1
            f_last = f_hat[0, -1]  # [d_t]
            logits = self.lm(f_last.to(self.lm.weight.dtype)).float()  # [V]; the drafter's head may be fp16
            feat = draft_features(logits[None])[0].cpu() if features else None  # [4]; on the host (see Draft)
            if sample:
                q = torch.softmax(logits.double() / temperature, dim=-1)  # [V]
                y = int(torch.multinomial(q, 1, generator=generator))
                probs.append(q.cpu())
            else:
                y = int(logits.argmax())
            if stop is not None and toks and stop(feat):
                probs = probs[: len(toks)]
                break
            toks.append(y)
            hids.append(f_last)
            if feat is not None:
                feats.append(feat)
            f_in, x_in = f_last[None, None], torch.tensor([[y]], device=self.device)
            if eos_token_id is not None and y == eos_token_id:
                break
        base = len(self.seq) - 1
        for j, f in enumerate(hids):  # the feature at position base + j is the one that gave token j
            self.feats.setdefault(base + j, f)
        if calls:
            self.kv, self.fed_end = past, base + calls - 1  # the first call fed up to base, each later one a position
            self.kv_end = self.fed_end
        self.drafted = list(toks)
        return Draft(toks, torch.stack(hids).cpu() if hids else None, torch.stack(probs) if probs else None,
                     torch.stack(feats) if feats else None)

    def draft_more(self, m: int, should_stop: Callable[[], bool]) -> Draft:
        """No proactive tokens: the next block starts from the target's feature of the VERDICT awaited."""
        return Draft([], None, None, None)

    def commit(self, tokens: list[int], carry: Draft | None = None) -> None:
        """Append the committed tokens; forget the features of positions past the committed ones, and old ones; keep
        the head's cache up to the last committed draft token it was fed (its input is then final)."""
        end = len(self.seq) - 1
        accepted = common_len(self.drafted, tokens)  # the block's leading tokens that were committed as drafted
        super().commit(tokens, None)
        self._trim_kv(min(self.fed_end, end + accepted))
        end = len(self.seq) - 1
        for p in [p for p in self.feats if p >= end or p < end - self.head.cfg.window - 1]:
            del self.feats[p]

    def _trim_kv(self, last: int) -> None:
        """Keep the head's cached positions up to ``last`` only, and of those the keys a next position can still see
        (none left, or caching off: no cache)."""
        n = 0 if self.kv is None else self.kv[0][0].shape[2]
        drop = max(0, self.kv_end - last)
        if not self.cache_rounds or n == 0 or drop >= n:
            self.kv, self.kv_end, self.fed_end = None, -1, -1
            return
        first = max(0, n - drop - (self.head.cfg.window - 1))
        self.kv = [(k[:, :, first:n - drop], v[:, :, first:n - drop]) for k, v in self.kv]
        self.kv_end = self.fed_end = self.kv_end - drop

    def _inputs(self) -> tuple[torch.Tensor, torch.Tensor, list | None]:
        """The head's inputs for this block's first call, and the past it reads: the committed positions after the
        kept cache where that cache holds exactly the keys a recompute over the window would (else the whole
        window, no past)."""
        end = len(self.seq) - 1
        start = self._context_start()  # the first position the window recompute reads
        if self.kv is None or not start - 1 <= self.kv_end < end:
            return *self._context(start), None
        first = self.kv_end - self.kv[0][0].shape[2] + 1  # the first cached position
        lo = end - self.head.cfg.window + 1  # the oldest position the newest one may attend to
        if max(first, lo) != max(start, lo):  # the cache holds a position the context leaves out, or lacks one
            return *self._context(start), None
        return *self._context(self.kv_end + 1), self.kv

    def _context_start(self) -> int:
        """The first committed position the head can see: back from the newest token while the feature before a
        position is known, at most ``window`` positions."""
        end = len(self.seq) - 1
        p = end
        while p >= 2 and end - p + 1 < self.head.cfg.window and (p - 2) in self.feats:
            p -= 1
        return p

    def _context(self, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's inputs for the committed positions ``start`` .. newest: ([1, T, d_t] f_{p-1}, [1, T] x_p), the
        newest's feature a zero one if it is not known yet."""
        end = len(self.seq) - 1
        zero = torch.zeros(self.head.cfg.d_t, device=self.device)
        f = [self.feats[p - 1] for p in range(start, end)] + [self.feats.get(end - 1, zero)]
        return torch.stack(f)[None], torch.tensor([self.seq[start:end + 1]], device=self.device)


def head_param_count(head: FeatureHead) -> int:
    """Trainable parameters (the frozen embedding and LM head copies not counted)."""
    return sum(p.numel() for p in head.parameters() if p.requires_grad)
