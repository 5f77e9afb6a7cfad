"""One save and one load for every stored policy (the paper's head, the judges), dispatched on a ``kind`` field.

A policy directory holds ``<stem>.json``, the policy's config with its ``kind``, and for a trained policy
``<stem>.safetensors``, its network's weights and standardisation buffers.  ``KINDS`` is the one table from a kind
to the policy class that builds it (``from_config``) and the file stem it is saved under: ``head`` for the paper's
head, ``judge`` for the judges.  A config written before the ``kind`` field was saved is read as its stem's first
kind (``head.json``: ``head``; ``judge.json``: ``linear``, JudgeConfig's default), so the shipped weights load.
A package adds kinds through the ``wisv_testbed.policies`` entry point (wisv.plugins; docs/extend.md): its
directories load here, and a kind that needs no weights is a ``--head NAME`` too (``named_policy``).
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from wisv import plugins
from wisv.head.judges import KINDS as JUDGE_KINDS
from wisv.head.judges import JudgePolicy
from wisv.head.model import DecisionHead, HeadPolicy
from wisv.head.policy import Kind, MismatchPolicy

RESERVED = ("default", "wisv-paper", "none", "accept-all")  # --head names no plugin kind may take


def add_plugin(name: str, loaded: object) -> None:
    """Add what a ``wisv_testbed.policies`` entry point ``name`` loads: a ``Kind``, stored as kind ``name``; a name
    already taken is refused (wisv.plugins reports it and skips the plugin)."""
    if not isinstance(loaded, Kind):
        raise TypeError(f"entry point {name!r} loads {loaded!r}, not a wisv.head.policy.Kind")
    if name in KINDS or name in RESERVED:
        raise ValueError(f"policy {name!r} already exists")
    KINDS[name] = loaded


KINDS: dict[str, Kind] = {"head": Kind(HeadPolicy, "head"), **{k: Kind(JudgePolicy, "judge") for k in JUDGE_KINDS}}
PLUGIN_KINDS = tuple(plugins.load(plugins.POLICIES, add_plugin))  # kinds added by entry points (wisv.plugins)
STEMS = tuple(dict.fromkeys(k.stem for k in KINDS.values()))  # head, judge: the config files a directory may hold
LEGACY_KIND = {"head": "head", "judge": "linear"}  # the kind of a config saved without one, by its stem


def config_file(path: str | Path) -> Path | None:
    """The policy config in directory ``path`` (or ``path`` itself when it is one), None when there is none."""
    path = Path(path)
    if path.suffix == ".json" and path.stem in STEMS:
        return path if path.is_file() else None
    return next((path / f"{s}.json" for s in STEMS if (path / f"{s}.json").is_file()), None)


def is_policy_dir(path: str | Path) -> bool:
    """Whether ``path`` holds a stored head or judge."""
    return config_file(path) is not None


def save_policy(policy: HeadPolicy | JudgePolicy, path: str | Path) -> Path:
    """Write ``<stem>.json`` (kind and config) and, for a trained policy, ``<stem>.safetensors`` into ``path``."""
    stem = KINDS[policy.kind].stem
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{stem}.json").write_text(json.dumps({"kind": policy.kind, **asdict(policy.cfg)}, indent=1))
    if policy.model is not None:
        save_file({k: v.contiguous() for k, v in policy.model.state_dict().items()}, str(path / f"{stem}.safetensors"))
    return path


def load_policy_dir(path: str | Path, tau: float | None = None, d_draft: int | None = None,
                    d_target: int | None = None) -> tuple[MismatchPolicy, float]:
    """(policy, tau) of a stored head or judge; ``tau`` overrides its own.  A clear ValueError on bad files, an unknown
    kind, or a policy that reads other hidden sizes than the given drafter's and target's."""
    cfg_file = config_file(path)
    if cfg_file is None:
        files = " or ".join(f"{s}.json" for s in STEMS)
        raise ValueError(f"{path} is not a decision-head directory (needs {files} and its weights)")
    stem = cfg_file.stem
    try:
        raw = json.loads(cfg_file.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{cfg_file}: not a valid {stem} config ({e})") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_file}: not a valid {stem} config (a JSON object expected)")
    kind = raw.setdefault("kind", LEGACY_KIND[stem])
    if kind not in KINDS or KINDS[kind].stem != stem:
        raise ValueError(f"{cfg_file}: kind {kind!r} is not a {stem}'s: expected one of "
                         f"{[k for k, v in KINDS.items() if v.stem == stem]}")
    policy = KINDS[kind].policy.from_config(raw, str(cfg_file))
    if policy.model is not None:
        w_file = cfg_file.with_suffix(".safetensors")
        try:
            policy.model.load_state_dict(load_file(str(w_file)))
        except (OSError, RuntimeError, SafetensorError) as e:
            raise ValueError(f"{w_file}: weights do not match {cfg_file.name} ({e})") from e
        policy.model.eval()
    check_widths(policy, path, d_draft, d_target)
    return policy, policy.tau if tau is None else tau


def named_policy(name: str) -> MismatchPolicy | None:
    """``--head NAME`` for a plugin's kind that needs no weights: its policy with its config's defaults (None for any
    other name); a kind that needs trained weights is a ValueError asking for its directory."""
    if name not in PLUGIN_KINDS:
        return None
    policy = KINDS[name].policy.from_config({"kind": name}, f"--head {name}")
    if policy.model is not None:
        raise ValueError(f"--head {name}: this kind needs trained weights; pass its directory instead")
    return policy


def check_widths(policy: MismatchPolicy, path: str | Path, d_draft: int | None, d_target: int | None) -> None:
    """ValueError when the policy reads other hidden sizes than the given drafter's and target's (None: unchecked)."""
    for role, want, have in (("drafter", d_draft, policy.d_draft), ("target", d_target, policy.d_target)):
        if want is not None and have is not None and have != want:
            raise ValueError(f"head {path} expects {role} hidden size {have}, the {role} has {want}")


def save_head(head: DecisionHead, path: str | Path) -> Path:
    """Save a paper head's network (labeling's train and export stages); its train/eval mode is left as it was."""
    training = head.training
    try:
        return save_policy(HeadPolicy(head), path)
    finally:
        head.train(training)


def load_head(path: str | Path) -> DecisionHead:
    """The network of a stored paper head (labeling's stages read its config and train or sweep it)."""
    policy, _ = load_policy_dir(path)
    if not isinstance(policy, HeadPolicy):
        raise ValueError(f"{path} holds a {policy.kind} judge, not a decision head (head.json)")
    return policy.head
