"""Stage (judges): train our edge judge and the peer judges on labelled mismatches, choose every tau on a dev slice.

Reads one or more run directories (``collect`` + ``label``: traces.npz with the edge features, labels.csv with the
harm label), leaves out the mismatches whose draft token is the target's EOS (acceptance always rejects those: keeping
one ends the output early, which the harm label cannot see), and splits each by prompt: every ``dev_every``-th episode
is dev, the rest train.  Nothing here reads a test pool.  Judges (wisv/head/judges.py):

- ``edge`` (ours): logistic regression (or an MLP) over what the edge knows for free, its scalar features and its
  hidden state after the draft token, trained with mismatches that turn a right answer wrong weighted
  ``wrong_weight`` times; CSI-aware through tau(csi) (link mode);
- ``edge-blind``: the same judge at one fixed tau on every link (the CSI-blind ablation);
- ``autojudge``: logistic regression on [h_d ; h_t] (AutoJudge-style; needs fh or sh);
- ``judge-decoding``: logistic regression on the target's hidden state after the draft token (Judge-Decoding-style);
- ``fly``: entropy gate plus lookahead agreement, no training (FLy-style);
- ``nll-margin``: a threshold on the NLL margin, no training.

One rule picks every tau on dev: the largest tau of the grid whose accepted dev mismatches (p < tau) are at most
``max_harm_frac`` harmful and, of those with an answer to check, at most ``max_wrong_frac`` turn a right answer wrong.
Writes judges_sweep.csv (the tau sweep per judge on dev), judges_curve.csv (held-out AUC per feature set against
training labels), judges_signals.csv (each edge scalar alone: its dev AUC on the harm and the flip label),
judges.json (the choices), and one judge directory per judge under ``out_dir``.
"""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from channel.csi import CSI
from labeling.config import JudgesConfig
from labeling.risk import RiskConfig, ltt_sweep, ltt_tau
from labeling.store import EPISODES, load_config, load_labelled, require, save_config
from wisv.head.features import BASE_SCALARS, SCALARS, EdgeFeatures, with_out_pos
from wisv.head.guard import guard
from wisv.head.judges import JudgeConfig, JudgePolicy, LinearJudge, rule_probs, t_link_s
from wisv.head.store import save_policy
from wisv.tasks.jsonl import read_jsonl

FEATURE_SETS = {"edge": ("edge",), "h_after": ("h_after",), "hd_ht": ("h_draft", "h_target"),
                "edge_h_after": ("edge", "h_after"), "edge_sib": ("edge",)}  # the learning curve's input sets
SET_WIDTHS = {"edge_sib": {"edge": len(SCALARS)}}  # a set's input widths beyond run()'s (edge_sib: the sib_* columns
# too; reported only where the traces recorded them: collect --sibling)
TAUS = sorted({round(float(t), 4) for t in np.geomspace(0.002, 0.98, 48)})  # the dev sweep's grid, fine near 0
SOURCES = {"edge": "edge", "h_after": "h_after", "h_draft": "h_d", "h_target": "h_t"}  # input -> traces.npz key


def load_data(run_dirs: list[str], dev_every: int, dev_kinds: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
    """Traces joined with labels over every run directory, with a dev flag per mismatch (its prompt's): the prompts
    of ``dev_kinds`` (leave kinds out, so that every choice is made on kinds the judge was not trained on), else every
    ``dev_every``-th prompt."""
    parts = []
    for k, run_dir in enumerate(run_dirs):
        lab, tr = load_labelled(run_dir)
        rows = lab.index.to_numpy()
        rows = rows[tr["draft_id"][rows] != target_eos(run_dir)]  # a draft EOS is always rejected (wisv_accept)
        lab = lab.loc[rows]
        part = {key: tr[key][rows].astype(np.float32) for key in SOURCES.values()}
        part["edge"] = with_out_pos(part["edge"], tr["position"][rows])  # traces recorded before out_pos
        part["y"] = lab["harmful"].to_numpy(np.float32)
        part["turns_wrong"] = lab["turns_wrong"].to_numpy(np.float32)
        episodes = read_jsonl(require(run_dir, EPISODES, "collect"))
        answers = [e.get("answer") is not None for e in episodes]
        part["checkable"] = np.asarray(answers, bool)[tr["episode"][rows]]  # free-form rows cannot turn wrong
        kinds = np.asarray([str(e.get("kind", "")) for e in episodes])[tr["episode"][rows]]
        part["dev"] = np.isin(kinds, dev_kinds) if dev_kinds else (tr["episode"][rows] % dev_every == 0)
        part["source"] = np.full(len(rows), k)
        parts.append(part)
    return {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}


def target_eos(run_dir: str) -> int | None:
    """The EOS id of the target a run directory was collected with (its config), None if it has none."""
    from transformers import AutoConfig
    target = load_config(run_dir, "collect").get("target")
    eos = getattr(AutoConfig.from_pretrained(target), "eos_token_id", None) if target else None
    return eos[0] if isinstance(eos, list) else eos


def prompt_files(run_dirs: list[str]) -> list[str]:
    """The prompt file each run directory was collected on (its collect config), relative to the repository: the
    card's test checks that none is a test pool."""
    repo = Path(__file__).resolve().parents[1]
    out = []
    for run_dir in run_dirs:
        p = Path(str(load_config(run_dir, "collect").get("prompts_file") or "toy calib split"))
        out.append(str(p.resolve().relative_to(repo)) if p.resolve().is_relative_to(repo) else str(p))
    return out


def inputs(data: dict, names: tuple[str, ...], mask: np.ndarray, dims: dict[str, int] | None = None) -> torch.Tensor:
    """The concatenated named inputs of the masked mismatches, each its first ``dims[name]`` columns (default all):
    [n, d_in]."""
    dims = dims or {}
    return torch.from_numpy(np.concatenate([data[SOURCES[n]][mask][:, :dims.get(n)] for n in names], axis=1))


def input_dims(data: dict) -> dict[str, int]:
    """Each input's width as judges read it: ``edge`` its one-pass columns (BASE_SCALARS; the sib_* columns only
    where a feature set asks, SET_WIDTHS), the others whole."""
    dims = {n: data[SOURCES[n]].shape[1] for n in SOURCES}
    return {**dims, "edge": min(dims["edge"], len(BASE_SCALARS))}


def train_linear(cfg: JudgeConfig, x: torch.Tensor, y: torch.Tensor, epochs: int, seed: int,
                 weight: torch.Tensor | None = None) -> LinearJudge:
    """Full-batch Adam on BCE (per-mismatch ``weight``; unweighted, p estimates the harm rate), weight decay against
    overfitting."""
    torch.manual_seed(seed)
    model = LinearJudge(cfg)
    model.set_standardisation(x)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-3)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model.logits(x), y, weight=weight)
        loss.backward()
        opt.step()
    return model.eval()


def auc(p: np.ndarray, y: np.ndarray) -> float:
    """Area under the ROC curve of scores p for labels y (rank statistic; nan with one class)."""
    pos, neg = p[y == 1], p[y == 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    ranks = pd.Series(np.concatenate([pos, neg])).rank().to_numpy()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def sweep(p: np.ndarray, y: np.ndarray, wrong: np.ndarray, taus: list[float],
          checkable: np.ndarray | None = None) -> pd.DataFrame:
    """Per tau: the fraction of dev mismatches accepted (p < tau), the harmful fraction of those accepted, and the
    turns-wrong fraction of those accepted that have an answer to check (``checkable``; default all)."""
    checkable = np.ones(len(p), bool) if checkable is None else checkable
    rows = []
    for tau in taus:
        acc = p < tau
        n, nc = int(acc.sum()), int((acc & checkable).sum())
        rows.append({"tau": tau, "accepted_frac": n / max(1, len(p)),
                     "harmful_of_accepted": float(y[acc].mean()) if n else 0.0,
                     "turns_wrong_of_accepted": float(wrong[acc & checkable].mean()) if nc else 0.0})
    return pd.DataFrame(rows)


def choose_tau(sw: pd.DataFrame, max_harm_frac: float, max_wrong_frac: float = 1.0) -> float:
    """The rule: the largest tau whose accepted dev mismatches are at most ``max_harm_frac`` harmful and at most
    ``max_wrong_frac`` turning a right answer wrong (0: none passes, greedy)."""
    ok = sw[(sw["harmful_of_accepted"] <= max_harm_frac) & (sw["turns_wrong_of_accepted"] <= max_wrong_frac)
            & (sw["accepted_frac"] > 0)]
    return float(ok["tau"].max()) if len(ok) else 0.0


def tau_rule(p: np.ndarray, data: dict, sw: pd.DataFrame, cfg: JudgesConfig) -> tuple[float, dict]:
    """tau on dev and how it was chosen: with ``flip_budget`` the largest tau whose upper bound on answer flips among
    the accepted checkable dev mismatches is within it (labeling/risk.py), else the point rule (``choose_tau``).
    With the bound, ``how`` also holds the tightest bound of any tau that accepts something (``dev_bound_best``:
    what the budget would have to be for the rule to pass one) and the per-tau table (``ltt``, a DataFrame)."""
    dev = data["dev"]
    if cfg.flip_budget is None:
        return choose_tau(sw, cfg.max_harm_frac, cfg.max_wrong_frac), {
            "rule": f"largest tau with <= {cfg.max_harm_frac} of accepted dev mismatches harmful and <= "
                    f"{cfg.max_wrong_frac} of those with an answer turning it wrong"}
    risk = RiskConfig(cfg.flip_budget, cfg.flip_delta)
    lt = ltt_sweep(p, data["turns_wrong"][dev] > 0, data["checkable"][dev], TAUS, risk)
    tau = ltt_tau(lt)
    at = lt[lt["tau"] == tau]
    bound = {"flip_upper": float(at["flip_upper"].iloc[0]), "flips": int(at["flips"].iloc[0]),
             "accepted_checkable": int(at["accepted_checkable"].iloc[0])} if len(at) else {}
    some = lt[lt["accepted_checkable"] > 0]
    best = some.loc[some["flip_upper"].idxmin()] if len(some) else None
    tightest = {"tau": float(best["tau"]), "flip_upper": float(best["flip_upper"]), "flips": int(best["flips"]),
                "accepted_checkable": int(best["accepted_checkable"])} if best is not None else {}
    return tau, {"rule": f"largest tau whose upper {1 - cfg.flip_delta:.0%} Clopper-Pearson bound on answer flips "
                         f"among accepted checkable dev mismatches is <= {cfg.flip_budget}", "dev_bound": bound,
                 "dev_bound_best": tightest, "ltt": lt}


def peer_configs(cfg: JudgesConfig, dims: dict[str, int]) -> list[JudgeConfig]:
    """The judges to train or set, before their tau is chosen."""
    def lin(name: str, names: tuple[str, ...], hidden: int = 0) -> JudgeConfig:
        return JudgeConfig(name, "linear", names, tuple(dims[n] for n in names), hidden=hidden)
    edge = replace(lin("edge", tuple(cfg.edge_inputs), cfg.edge_hidden), guard_top1_min=cfg.guard_top1_min,
                   guard_margin_nats=cfg.guard_margin_nats,
                   guard_protect_tokens=cfg.guard_protect_tokens)  # ours, with the guard
    return [edge, lin("autojudge", ("h_draft", "h_target")),
            lin("judge-decoding", ("h_after",)), JudgeConfig("fly", "fly", ("edge",), (dims["edge"],),
                                                             window=cfg.fly_window),
            JudgeConfig("nll-margin", "nll-margin", ("edge",), (dims["edge"],))]


def fit_judge(jc: JudgeConfig, data: dict, cfg: JudgesConfig) -> tuple[JudgePolicy, np.ndarray]:
    """The judge fitted on the train slice, and its repair probabilities on dev."""
    train, dev = ~data["dev"], data["dev"]
    if jc.kind != "linear":
        ef = EdgeFeatures(torch.from_numpy(data["edge"][dev]), torch.zeros(int(dev.sum()), 0))
        return JudgePolicy(jc), rule_probs(jc, ef).numpy()
    weight = None
    if jc.name == "edge":  # ours: a mismatch that turns a right answer wrong costs wrong_weight times more
        weight = torch.from_numpy(1 + (cfg.wrong_weight - 1) * data["turns_wrong"][train])
    widths = dict(zip(jc.inputs, jc.dims))
    model = train_linear(jc, inputs(data, jc.inputs, train, widths), torch.from_numpy(data["y"][train]), cfg.epochs,
                         cfg.seed,
                         weight)
    with torch.no_grad():
        p = torch.sigmoid(model.logits(inputs(data, jc.inputs, dev, widths)))
    if jc.guard_config is not None:  # the guard as the edge applies it (JudgePolicy.reject_probs)
        p = guard(p, EdgeFeatures(torch.from_numpy(data["edge"][dev]), torch.zeros(int(dev.sum()), 0)),
                  jc.guard_config)
    return JudgePolicy(jc, model), p.numpy()


def link_scale(cfg: JudgesConfig) -> float:
    """t_link(good) / t_link(poor): how much of the poor link's harm budget the good link may spend."""
    bits = tuple(cfg.link_bits)
    return t_link_s(CSI.symmetric(*cfg.good_link), bits) / t_link_s(CSI.symmetric(*cfg.poor_link), bits)


def good_link_cfg(cfg: JudgesConfig) -> JudgesConfig:
    """The dev rule with its budgets scaled to the good link (link_scale)."""
    scale = link_scale(cfg)
    return replace(cfg, max_harm_frac=cfg.max_harm_frac * scale,
                   flip_budget=None if cfg.flip_budget is None else cfg.flip_budget * scale)


def link_judge(jc: JudgeConfig, tau: float, tau_good: float, cfg: JudgesConfig, notes: dict) -> JudgeConfig:
    """Our judge in link mode: tau on the poor link by the dev rule, ``tau_good`` on the good link by the same rule
    with its budgets scaled by t_link(good) / t_link(poor) (good_link_cfg); gamma the power law through both."""
    bits = tuple(cfg.link_bits)
    t_poor, t_good = (t_link_s(CSI.symmetric(*link), bits) for link in (cfg.poor_link, cfg.good_link))
    scale = t_good / t_poor
    tau_good = tau_good or min(TAUS) / 2  # none passes: below the grid
    gamma = math.log(tau / tau_good) / math.log(t_poor / t_good) if tau > tau_good else 1.0
    return replace(jc, tau=tau, tau_mode="link", t_ref_s=t_poor, gamma=gamma, link_bits=bits,
                   notes={**notes, "poor_link": list(cfg.poor_link), "good_link": list(cfg.good_link),
                          "tau_good": tau_good, "good_harm_budget": cfg.max_harm_frac * scale})


def learning_curve(data: dict, cfg: JudgesConfig, dims: dict[str, int]) -> pd.DataFrame:
    """Dev AUC per feature set (on the harm label, and on the flip label among checkable dev mismatches) against the
    number of training labels (seeded subsets of the train slice); a set whose
    columns the traces lack (edge_sib without collect --sibling) is left out."""
    rng = np.random.default_rng(cfg.seed)
    sets = {}
    for set_name, names in FEATURE_SETS.items():
        widths = {**dims, **SET_WIDTHS.get(set_name, {})}
        if all(widths[k] <= data[SOURCES[k]].shape[1] for k in names) and \
                not np.isnan(inputs(data, names, np.ones(len(data["y"]), bool), widths).numpy()).any():
            sets[set_name] = (names, widths)
    train_idx = np.flatnonzero(~data["dev"])
    rows = []
    for n in [s for s in cfg.curve_sizes if s <= len(train_idx)] + [len(train_idx)]:
        pick = np.zeros(len(data["y"]), bool)
        pick[rng.choice(train_idx, n, replace=False)] = True
        for set_name, (names, widths) in sets.items():
            jc = JudgeConfig(set_name, "linear", names, tuple(widths[k] for k in names))
            model = train_linear(jc, inputs(data, names, pick, widths), torch.from_numpy(data["y"][pick]), cfg.epochs,
                                 cfg.seed)
            with torch.no_grad():
                p = torch.sigmoid(model.logits(inputs(data, names, data["dev"], widths))).numpy()
            checkable = data["checkable"][data["dev"]]
            rows.append({"labels": n, "features": set_name, "dev_auc": auc(p, data["y"][data["dev"]]),
                         "dev_flip_auc": auc(p[checkable], data["turns_wrong"][data["dev"]][checkable])})
    return pd.DataFrame(rows)


def signal_aucs(data: dict) -> pd.DataFrame:
    """Each edge scalar alone as a score on dev: its AUC on the harm label, and on the flip label among checkable dev
    mismatches (below 0.5: smaller values flip more; out_pos's is about where in the output answers change).  The
    columns the traces lack (the sibling ones without collect --sibling) are left out."""
    dev = data["dev"]
    checkable = data["checkable"][dev]
    rows = []
    for i, name in enumerate(SCALARS):
        x = data["edge"][dev][:, i]
        if np.isnan(x).any():
            continue
        rows.append({"signal": name, "dev_auc": auc(x, data["y"][dev]),
                     "dev_flip_auc": auc(x[checkable], data["turns_wrong"][dev][checkable])})
    return pd.DataFrame(rows)


def choose_protect(cfg: JudgesConfig, data: dict, dims: dict[str, int]) -> tuple[JudgesConfig, list[dict]]:
    """``guard_protect_grid``: our judge's protected prefix chosen on dev.  Each N is tested at flip_delta / len(grid)
    (Bonferroni over the grid: the bound holds for whichever N is chosen); the N whose dev-chosen tau keeps the most
    dev mismatches wins, ties to the larger N.  Returns the config our judge is then trained and set with, and the
    table per N.  Without a grid: cfg as it is, no table."""
    grid = sorted(set(cfg.guard_protect_grid))
    if not grid:
        return cfg, []
    strict = replace(cfg, flip_delta=cfg.flip_delta / len(grid))
    dev, rows = data["dev"], []
    for n in grid:
        c = replace(strict, guard_protect_tokens=n)
        _, p = fit_judge(peer_configs(c, dims)[0], data, c)
        sw = sweep(p, data["y"][dev], data["turns_wrong"][dev], TAUS, data["checkable"][dev])
        tau, how = tau_rule(p, data, sw, c)
        rows.append({"protect_tokens": n, "tau": tau, "kept_frac": float((p < tau).mean()),
                     **{f"bound_{k}": v for k, v in how.get("dev_bound", {}).items()},
                     **{f"best_{k}": v for k, v in how.get("dev_bound_best", {}).items()}})
        print(f"judges: protect {n:3d} tokens  tau {tau:.4f}  keeps {rows[-1]['kept_frac']:.1%} of dev mismatches")
    best = max(rows, key=lambda r: (r["kept_frac"], r["protect_tokens"]))
    return replace(strict, guard_protect_tokens=best["protect_tokens"]), rows


def run(cfg: JudgesConfig) -> dict:
    """Train, sweep and choose on dev; write the tables and the judge directories."""
    torch.set_num_threads(1)
    data = load_data(cfg.run_dirs, cfg.dev_every, tuple(cfg.dev_kinds))
    dims = input_dims(data)
    out, taus = Path(cfg.results_dir), TAUS
    out.mkdir(parents=True, exist_ok=True)
    dev = data["dev"]
    sweeps, chosen = [], {}
    ours, protect = choose_protect(cfg, data, dims)  # our judge's config: its protected prefix chosen on dev
    if protect:
        pd.DataFrame(protect).to_csv(out / "judges_protect.csv", index=False)
    for jc in peer_configs(ours, dims):
        c = ours if jc.name == "edge" else cfg
        policy, p = fit_judge(jc, data, c)
        sw = sweep(p, data["y"][dev], data["turns_wrong"][dev], taus, data["checkable"][dev]).assign(judge=jc.name)
        tau, how = tau_rule(p, data, sw, c)
        lt = how.pop("ltt", None)
        if lt is not None:  # the bound's figures per tau beside the sweep's fractions
            sw = sw.merge(lt[["tau", "accepted_checkable", "flips", "flip_upper"]], on="tau", how="left")
        checkable = data["checkable"][dev]
        notes = {"dev_auc": auc(p, data["y"][dev]),
                 "dev_flip_auc": auc(p[checkable], data["turns_wrong"][dev][checkable]), **how,
                 "dev_kinds": list(cfg.dev_kinds), "train": int((~dev).sum()), "dev": int(dev.sum()),
                 "run_dirs": [Path(r).name for r in cfg.run_dirs], "prompt_files": prompt_files(cfg.run_dirs)}
        variants = [(jc.name, replace(jc, tau=tau, notes=notes))]
        if jc.name == "edge":
            notes = {**notes, "protect_grid": protect} if protect else notes
            tau_good = tau_rule(p, data, sw, good_link_cfg(c))[0]
            variants = [("edge", link_judge(jc, tau, tau_good, c, notes)),
                        ("edge-blind", replace(jc, name="edge-blind", tau=tau, notes=notes))]
        for name, final in variants:
            save_policy(JudgePolicy(final, policy.model), Path(cfg.out_dir) / name)
            chosen[name] = {"tau": tau, **notes, **({"t_ref_s": final.t_ref_s, "gamma": final.gamma,
                                                     "tau_good": final.notes["tau_good"]}
                                                    if final.tau_mode == "link" else {})}
        sweeps.append(sw)
        print(f"judges: {jc.name:15s} dev AUC {notes['dev_auc']:.3f}  tau {tau:.4f}  "
              f"accepts {float((p < tau).mean()):.1%} of dev mismatches")
    pd.concat(sweeps).to_csv(out / "judges_sweep.csv", index=False)
    curve = learning_curve(data, cfg, dims)
    curve.to_csv(out / "judges_curve.csv", index=False)
    signals = signal_aucs(data)
    signals.to_csv(out / "judges_signals.csv", index=False)
    print(f"each edge signal alone on dev:\n{signals.round(3).to_string(index=False)}")
    (out / "judges.json").write_text(json.dumps(chosen, indent=1))
    save_config(out, "judges", cfg, {"labelled": len(data["y"]), "harmful": float(data["y"].mean()),
                                     "dev": int(dev.sum())})
    for col in ("dev_auc", "dev_flip_auc"):
        print(f"{col} by training labels and feature set:")
        print(curve.pivot(index="labels", columns="features", values=col).round(3).to_string())
    return chosen
