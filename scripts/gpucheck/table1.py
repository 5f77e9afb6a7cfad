"""Table I from shipped acceptance traces (pure apart from reading them): the simulator's latency model
(testbed.sim.model) over the SmolLM2 pair's traces, so the GPU host needs no pair; one latency column per edge
profile (the spec-sheet ``a40`` and this GPU's measured one).

``export_traces`` copies the traces a ``testbed.simulate`` run cached (CSV + key JSON) and writes ``table1.json``:
the run's methods, links, dimensions, UE profile, the head's size and the windows shipped.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd

from channel.csi import CSI
from testbed.sim.model import constant, prompt_latencies, summarize
from testbed.sim.traces import trace_rule
from wisv.timing.compute import get_architecture
from wisv.timing.hardware import HardwareProfile, get_profile
from wisv.timing.latency import PayloadBits
from wisv.timing.protodesc import describe
from wisv.timing.roundtime import Deployment

MANIFEST = "table1.json"


def export_traces(cache_dir: Path, sim_config: Path, head_dir: Path, dest: Path, draft_lens: list[int]) -> Path:
    """Copy the cached traces of ``draft_lens`` from a simulate run's cache and write the manifest: that run's
    settings (its ``config.json``), the head's size, and the windows shipped."""
    cfg, head = json.loads(sim_config.read_text()), json.loads((head_dir / "head.json").read_text())
    dest.mkdir(parents=True, exist_ok=True)
    for k in draft_lens:
        for f in sorted(cache_dir.glob(f"*-k{k}-*.csv")):
            shutil.copy(f, dest / f.name)
            shutil.copy(f.with_suffix(".json"), dest / f.with_suffix(".json").name)
    keep = ("methods", "rates_mbps", "rtts_ms", "per", "prompts", "max_new_tokens", "arch_drafter", "arch_target",
            "ue_profile", "edge_profile", "payload", "pair")
    manifest = {k: cfg[k] for k in keep} | {"draft_lens": draft_lens, "head_hidden": head["hidden"],
                                           "csi_dim": head["csi_dim"], "prompts_file": Path(cfg["prompts_file"]).name,
                                           "from": str(sim_config)}
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return dest


def find_trace(traces: Path, rule: str, k: int, csi: CSI) -> pd.DataFrame:
    """The trace of (rule, K); for wisv, the one generated with the link's CSI."""
    want = list(csi.to_dict().values())
    for key_file in sorted(traces.glob(f"{rule}-k{k}-*.json")):
        key = json.loads(key_file.read_text())
        if rule != "wisv" or key["csi"] == want:
            return pd.read_csv(key_file.with_suffix(".csv"), dtype={"prompt_id": str, "protocol": str})
    raise FileNotFoundError(f"{traces}: no {rule} trace for K={k}" + (f" at CSI {want}" if rule == "wisv" else ""))


def deployment(m: dict, edge: HardwareProfile) -> Deployment:
    """The manifest's dims, UE profile, paper payload and head size, with ``edge`` verifying."""
    d, t = get_architecture(m["arch_drafter"]), get_architecture(m["arch_target"])
    return Deployment(d, t, get_profile(m["ue_profile"]), edge, PayloadBits.paper(vocab=d.vocab, d_d=d.d_model),
                      head_hidden=m["head_hidden"], csi_dim=m["csi_dim"])


def table1(traces: Path, edges: dict[str, HardwareProfile]) -> pd.DataFrame:
    """One row per (method, K, link): AAL and rounds from the trace, latency and throughput per edge profile."""
    m = json.loads((traces / MANIFEST).read_text())
    deps = {label: deployment(m, prof) for label, prof in edges.items()}
    rows = []
    for k in m["draft_lens"]:
        for method in m["methods"]:
            for rate in m["rates_mbps"]:
                for rtt in m["rtts_ms"]:
                    csi = CSI.symmetric(rate, rtt, m["per"])
                    rule = trace_rule(describe(method), True)  # fh / sh: wisv (the head's traces)
                    trace = find_trace(traces, rule, k, csi)
                    row = {"method": f"WISV-{method.upper()}" if rule == "wisv" else method, "draft_len": k,
                           "link": f"{rate:g} Mbps / {rtt:g} ms"}
                    for label, dep in deps.items():
                        s = summarize(trace, prompt_latencies(trace, method, constant(csi), dep))
                        row |= {"aal": s["aal"], "rounds_per_prompt": s["rounds_per_prompt"],
                                f"latency_s_{label}": s["latency_s"],
                                f"throughput_tok_s_{label}": s["throughput_tok_s"]}
                    rows.append(row)
    return pd.DataFrame(rows)
