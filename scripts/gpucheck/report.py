"""The check's verdicts and its Markdown report (pure): goals met or missed, from the JSON report."""
from __future__ import annotations

import math

import pandas as pd

BUDGET_S = 360.0  # the whole check on one H100
R2_MIN, MAPE_MAX_PCT = 0.99, 5.0  # WISP's estimator: 0.992 / 4.93%


def goals(rep: dict) -> list[dict]:
    """Each goal of the check with its value and whether it was met (None: its stage did not run); ``gpu_only``:
    a goal about the GPU's timing, which a ``--tiny`` CPU run reports without being held to it."""
    ll, est, e2e = rep.get("lossless", {}), rep.get("estimator", {}), rep.get("e2e", {})
    ratios = [(p["protocol"], p["bytes"]["up_ratio"]) for p in e2e.get("protocols", []) if "bytes" in p]  # d matters
    matches = [p["summary"]["matches_target"] for p in e2e.get("protocols", []) if "summary" in p]
    certified = [c["ok"] / max(1, c["prompts"]) for c in (p.get("certified") for p in e2e.get("protocols", [])) if c]
    out = [("whole check", f"<= {BUDGET_S:g} s", rep.get("total_s"), lambda v: v <= BUDGET_S, True),
           ("lossless chain+tree (near-ties certified)", "all prompts", ll.get("ok"), bool, False),
           ("drafter AAL (chain)", ">= 1", ll.get("chain", {}).get("aal"), lambda v: v >= 1, False),
           ("estimator held-out R^2", f">= {R2_MIN}", est.get("test", {}).get("r2"), lambda v: v >= R2_MIN, True),
           ("estimator held-out MAPE %", f"<= {MAPE_MAX_PCT}", est.get("test", {}).get("mape_pct"),
            lambda v: v <= MAPE_MAX_PCT, True),
           ("uplink bytes/round vs payload model (worst |ratio - 1|)", "<= 0.01",
            max((abs(r - 1) for _, r in ratios), default=None), lambda v: v <= 0.01, False),
           ("testbed lossless, near-ties certified (worst protocol; matches_target in the table)", "1.0",
            min(certified, default=None) if certified else min(matches, default=None), lambda v: v >= 1, False)]
    return [{"measure": m, "target": t, "value": v, "met": None if v is None else bool(ok(v)), "gpu_only": g}
            for m, t, v, ok, g in out]


def _fmt(v) -> str:
    if isinstance(v, float):
        return "nan" if math.isnan(v) else f"{v:.4g}"
    return "-" if v is None else str(v)


def _table(rows: list[dict]) -> str:
    if not rows:
        return "(none)\n"
    df = pd.DataFrame(rows)
    head = "| " + " | ".join(df.columns) + " |\n|" + " --- |" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(_fmt(v) for v in r) + " |\n" for r in df.itertuples(index=False))


def e2e_rows(e2e: dict) -> list[dict]:
    out = []
    for p in e2e.get("protocols", []):
        if "error" in p:
            out.append({"protocol": p["protocol"], "error": p["error"]})
            continue
        b, s = p["bytes"], p["summary"]
        out.append({"protocol": p["protocol"], "up_B/round": b["up_bytes_per_round"],
                    "up_model_B": b["up_model_bytes_per_round"], "up_ratio": b["up_ratio"],
                    "down_B/round": b["down_bytes_per_round"], "down_model_B": b["down_model_bytes_per_round"],
                    "down_ratio": b["down_ratio"], "verify_ms/round": p["verify_ms_per_round"],
                    "aal": s["aal"], "matches_target": s["matches_target"],
                    "certified_ok": p.get("certified", {}).get("ok")})
    return out


def markdown(rep: dict) -> str:
    """The short report: environment, goals, lossless, timing and ratio per K, testbed, draft cost, Table I."""
    env, ll = rep.get("environment", {}), rep.get("lossless", {})
    parts = [f"# GPU check ({rep.get('plan', {}).get('name', '?')})\n",
             f"{env.get('device_name')} ({env.get('memory_gib', '-')} GiB), torch {env.get('torch')}, CUDA "
             f"{env.get('cuda')}, transformers {env.get('transformers')}, Python {env.get('python')}; "
             f"total {_fmt(rep.get('total_s'))} s; stages (s): {_fmt(rep.get('stage_s'))}\n",
             "## Goals\n", _table(goals(rep))]
    if ll:
        drafter = rep.get("drafter", {})
        parts += ["## Lossless\n", _table([{"decoding": n, **ll[n]} for n in ("chain", "tree") if n in ll]),
                  f"drafter: {_fmt(drafter.get('kind'))}, sigma {_fmt(drafter.get('sigma'))}\n"]
    if "ratio_a40" in rep:
        parts += ["## Verification time, batch 1: measured / a40 profile\n", _table(rep["ratio_a40"])]
    if "profile" in rep:
        parts += [f"measured profile `{rep['profile']['name']}`: eta {_fmt(rep['profile']['eta'])}, pass overhead "
                  f"{_fmt(1e3 * rep['profile']['pass_overhead_s'])} ms, phase overhead "
                  f"{_fmt(1e3 * rep['profile']['phase_overhead_s'])} ms\n"]
    if rep.get("server_only"):
        parts += ["## Server-only: a decode step alone against a verification pass of K + 1 rows\n",
                  _table(rep["server_only"]),
                  "Speculation gives the edge more tokens per second of compute when its AAL exceeds "
                  "`break_even_aal` (= verify / decode - 1).\n"]
    if "e2e" in rep:
        parts += ["## Testbed end to end\n", _table(e2e_rows(rep["e2e"]))]
    if "draft" in rep:
        parts += [f"## Draft cost\n\n{rep['draft']['ms_per_token']:.3f} ms per token ({rep['plan']['drafter']})\n"]
    if "table1" in rep:
        parts += ["## Table I (SmolLM2 traces; Llama dims)\n", _table(rep["table1"])]
    for name, err in rep.get("errors", {}).items():
        parts.append(f"**{name} failed:** `{err}`\n")
    return "\n".join(parts)
