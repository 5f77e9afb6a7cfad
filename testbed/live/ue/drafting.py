"""What drafts on the UE: a drafter model (with a feature head or not), or prompt lookup (``--drafter ngram``), which
loads no model: its tokenizer, vocabulary size and EOS come from a model directory's files (``--vocab-dir``, else the
pair's target, else the built-in target)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from transformers import AutoConfig, GenerationConfig, PreTrainedModel

from protocols.handshake import Vocab
from protocols.schema import MAX_LOOKUP_N
from testbed.live.ue.ueconfig import UEConfig
from wisv.decoding.featdraft import FeatureDraftSession, FeatureHead, load_with_head, read_head_config
from wisv.decoding.ngram import NGRAM, NgramConfig, NgramDraftSession, refusal
from wisv.decoding.sessions import Drafting, DraftSession
from wisv.models.loader import builtin_paths, load_tokenizer, resolve_dtype, vocab_facts
from wisv.pairs import resolve_pair
from wisv.tasks.evaluate import eos_id
from wisv.timing.protodesc import describe
from wisv.timing.window import AUTO_DRAFT_LEN


@dataclass
class Drafter:
    """The UE's drafter and the vocabulary facts it declares."""

    model: PreTrainedModel | None  # the drafter model (None: prompt lookup)
    tok: object  # its tokenizer (None: the model directory holds none)
    vocab: Vocab  # declared at OPEN
    vocab_size: int  # the largest token id + 1 the wire takes (the model config's vocab_size)
    eos: int | None  # the EOS token id a draft ends at
    head: FeatureHead | None = None  # --drafter-head: the feature head, fed with the target's features
    feature_rows: int = 1  # --feature-rows
    ngram: NgramConfig | None = None  # --drafter ngram: prompt lookup's settings

    def session(self, ids: list[int]) -> Drafting:
        """The prompt's DraftSession: prompt lookup's, the feature head's, or the drafter's."""
        if self.ngram is not None:
            return NgramDraftSession(ids, self.ngram)
        if self.head is None:
            return DraftSession(self.model, ids)
        return FeatureDraftSession(self.model, ids, self.head, feature_rows=self.feature_rows)


def ngram_config(cfg: UEConfig) -> NgramConfig:
    """Prompt lookup's settings from the UE's flags (num_speculative_tokens: by default the largest K a round asks;
    a ValueError for bad bounds)."""
    k = cfg.draft_len_max if cfg.draft_len == AUTO_DRAFT_LEN else cfg.draft_len
    return NgramConfig(cfg.prompt_lookup_min, cfg.prompt_lookup_max, cfg.num_speculative_tokens or k)


def check(cfg: UEConfig, head_reads_drafter: bool = False) -> None:
    """Refuse, before anything is loaded or written, a bad --drafter-head, --drafter ngram with a protocol that
    needs more than token ids (wisv.decoding.ngram.refusal) or with --drafter-head, and a lookup stop the edge cannot
    run; a ValueError."""
    if cfg.lookup_stop_streak and cfg.drafter != NGRAM:
        raise ValueError("--lookup-stop-streak needs --drafter ngram: the edge runs the UE's prompt lookup on its "
                         "tokens, and a model's drafts only the drafter knows")
    if cfg.lookup_stop_streak and cfg.prompt_lookup_max > MAX_LOOKUP_N:
        raise ValueError(f"--lookup-stop-streak: the edge matches n-grams of at most {MAX_LOOKUP_N} tokens, and "
                         f"--prompt-lookup-max is {cfg.prompt_lookup_max}")
    if cfg.drafter != NGRAM:
        if cfg.drafter_head:
            read_head_config(cfg.drafter_head)
        return
    if cfg.drafter_head:
        raise ValueError("--drafter ngram drafts with no model: --drafter-head needs the drafter model it extends")
    ngram_config(cfg)
    why = refusal(describe(cfg.protocol), head_reads_drafter, cfg.draft_features)
    if why:
        raise ValueError(why)


def vocab_dir(cfg: UEConfig) -> Path:
    """Where --drafter ngram reads its vocabulary: --vocab-dir, else the pair's target, else the built-in target."""
    if cfg.vocab_dir:
        return Path(cfg.vocab_dir)
    return Path(resolve_pair(cfg.pair).target) if cfg.pair else builtin_paths()[1]


def load_drafter(cfg: UEConfig) -> Drafter:
    """The drafter --drafter names (a directory, ngram, or the built-in toy drafter), after ``check``."""
    if cfg.drafter == NGRAM:
        d = vocab_dir(cfg)
        tok = load_tokenizer(d, "vocabulary")
        size = int(AutoConfig.from_pretrained(d).vocab_size)
        eos = GenerationConfig.from_pretrained(d).eos_token_id
        vocab = Vocab(len(tok), vocab_facts(None, tok)[1]) if tok is not None else Vocab(size)
        return Drafter(None, tok, vocab, size, eos[0] if isinstance(eos, list) else eos, ngram=ngram_config(cfg))
    drafter_dir = Path(cfg.drafter) if cfg.drafter else builtin_paths()[0]
    tok = load_tokenizer(drafter_dir, "drafter")
    model, head = load_with_head(drafter_dir, cfg.device, resolve_dtype(cfg.dtype, cfg.device), cfg.drafter_head)
    return Drafter(model, tok, Vocab(*vocab_facts(model, tok)), int(model.config.vocab_size), eos_id(model), head,
                   cfg.feature_rows)
