"""The UE's side of the protocols that generate alone, and the UE session of any protocol by its description.

``ServerStream`` (server-only): OPEN as every session, then one GENERATE; each round takes the stream's next CHUNK
off the link (the link resends GENERATE, naming the chunk it waits for, after a timeout; and re-OPENs with the
committed prefix when the edge lost the session).  ``DeviceStream`` (on-device): each round, the drafter generates
greedily on the UE until the chunk rule ends a chunk; no message goes to the edge.  Both commit what they got on the
drafter's sequence, so that a resumed OPEN carries it.  protocols/stream.py holds the chunk rule and the edge's side.
"""
from __future__ import annotations

import time
from collections.abc import Callable

import torch

from channel.csi import CSI
from protocols.chunks import ChunkRule, chunk_due
from protocols.errors import EdgeError
from protocols.registry import get_protocol
from protocols.rounds import UEParams
from protocols.stream import ChunkState
from protocols.typed import Chunk
from protocols.ue_side import Link, UESession, edge_error
from protocols.wire import Message, MsgType, make
from wisv.decoding.sessions import Drafting
from wisv.decoding.speculative import truncate_output
from wisv.timing.window import WindowTracker


class ServerStream(UESession):
    """Server-only on the UE: ask once for the target's stream, then take one chunk per round."""

    def __init__(self, sid: str, drafter: Drafting, params: UEParams, eos_token_id: int | None,
                 stop: Callable[[torch.Tensor], bool] | None = None, window: WindowTracker | None = None):
        super().__init__(sid, drafter, params, eos_token_id, stop, window)
        self.rule = ChunkRule(params.stream_every_tokens, params.stream_every_ms)
        self.asked = False  # the GENERATE of the stream went out
        self.chunk: ChunkState | None = None  # the last chunk taken

    def play_round(self, csi_est: CSI | None, link: Link) -> ChunkState:
        """The next chunk: GENERATE first (later rounds only wait; the link resends it, naming this chunk, if none
        comes), then the CHUNK, committed."""
        ask = make(MsgType.GENERATE, self.sid, None, round=self.n_rounds, **self.rule.header(), **self.token)
        (link.expect if self.asked else link.send)(ask)
        self.asked = True
        for reply in link.replies():
            self.on_reply(reply)
            break
        return self.chunk

    def on_reply(self, msg: Message) -> None:
        """Commit a CHUNK (an ERROR raises)."""
        if msg.type == MsgType.ERROR:
            raise edge_error(msg)
        if msg.type != MsgType.CHUNK:
            raise EdgeError(f"unexpected {msg.type.name} while waiting for chunk {self.n_rounds}")
        c = Chunk.of(msg.header, msg.tensors)
        tokens = self._commit(list(c.tokens), c.done)
        self.chunk = ChunkState(c.round, self.p.protocol, tokens, t_decode_s=c.t_decode_s, t_edge_s=c.t_edge_s,
                                batch=c.batch, drafted=c.drafted, accepted=min(c.accepted, len(tokens)))

    def _commit(self, tokens: list[int], done: bool = False) -> list[int]:
        """Append a chunk's tokens to the output and the drafter's sequence; the session may be done."""
        tokens = truncate_output(tokens, self.p.max_new_tokens - len(self.tokens), self.eos)
        self.d.commit(tokens)
        self.tokens.extend(tokens)
        self.n_rounds += 1
        self.done = done or len(self.tokens) >= self.p.max_new_tokens or tokens[-1] == self.eos
        return tokens


class DeviceStream(ServerStream):
    """On-device on the UE: the drafter alone generates greedily, a chunk per round; nothing goes to the edge."""

    def play_round(self, csi_est: CSI | None, link: Link | None = None) -> ChunkState:
        """Generate until the chunk rule (or the budget, or EOS) ends the chunk; commit it."""
        t0, tokens, done = time.perf_counter(), [], False
        while not done and not chunk_due(self.rule, len(tokens), time.perf_counter() - t0):
            y = self.d.draft(1, eos_token_id=self.eos, features=False).tokens[0]
            self.d.commit([y])
            tokens.append(y)
            done = len(self.tokens) + len(tokens) >= self.p.max_new_tokens or y == self.eos
        index = self.n_rounds
        self.tokens.extend(tokens)
        self.n_rounds += 1
        self.done = done
        self.chunk = ChunkState(index, self.p.protocol, tokens, t_gen_s=time.perf_counter() - t0)
        return self.chunk


SESSIONS: dict[str, type[UESession]] = {"pair": UESession, "target": ServerStream,
                                        "drafter": DeviceStream}  # ProtocolDesc.generates -> the UE's session class


def ue_session(sid: str, drafter: Drafting, params: UEParams, eos_token_id: int | None,
               stop: Callable[[torch.Tensor], bool] | None = None,
               window: WindowTracker | None = None) -> UESession:
    """The UE session of ``params.protocol``, by what its description says generates."""
    cls = SESSIONS[get_protocol(params.protocol).desc.generates]
    return cls(sid, drafter, params, eos_token_id, stop, window)
