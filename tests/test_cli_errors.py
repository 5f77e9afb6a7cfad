"""One error shell for every CLI: bad input and unusable resources are one line, ``python -m X: error: ...``, exit 2;
a run whose every prompt failed exits non-zero.  The table holds every case of issue 26 and more."""
from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import zmq

from channel import emulator
from protocols.wire import Limits, MsgType, decode, encode, error_message, make
from testbed.live.edge import serve
from testbed.live.orchestrate import run
from testbed.live.ue import ue
from testbed.load import cli as load

MAINS = {"testbed.run": run.main, "testbed.ue": ue.main, "testbed.serve": serve.main, "testbed.load": load.main,
         "channel.emulator": emulator.main}

PARSE_ERRORS = [  # (program, argv, what the one line says after "error: ")
    ("testbed.run", ["--prompts", "0"], "--prompts: must be >= 1, got 0"),
    ("testbed.run", ["--edge-draft", "bogus"], "--edge-draft: 'bogus' is not one of ['none', 'ngram', 'suffix']"),
    ("testbed.run", ["--edge-draft-tokens", "0"], "--edge-draft-tokens: must be >= 1, got 0"),
    ("testbed.run", ["--edge-draft-cache-mb", "-1"], "--edge-draft-cache-mb: must be > 0, got -1"),
    ("testbed.run", ["--prompts", "-3"], "--prompts: must be >= 1, got -3"),
    ("testbed.run", ["--prompts", "abc"], "--prompts: expected int, got 'abc'"),
    ("testbed.run", ["--rate-mbps", "-5"], "--rate-mbps: must be >= 0 (0: unlimited), got -5"),
    ("testbed.run", ["--rate-up-mbps", "-1"], "--rate-up-mbps: must be >= 0, got -1"),
    ("testbed.run", ["--rtt-ms", "-10"], "--rtt-ms: must be >= 0, got -10"),
    ("testbed.run", ["--per", "1.5"], "--per: must be < 1, got 1.5"),
    ("testbed.run", ["--jitter-ms", "-1"], "--jitter-ms: must be >= 0, got -1"),
    ("testbed.run", ["--ues", "0"], "--ues: must be >= 1, got 0"),
    ("testbed.run", ["--max-new-tokens", "0"], "--max-new-tokens: must be >= 1, got 0"),
    ("testbed.run", ["--draft-len", "0"], "--draft-len: must be >= 1 (or auto), got 0"),
    ("testbed.run", ["--show", "-1"], "--show: must be >= 0, got -1"),
    ("testbed.run", ["--tau", "1.5"], "--tau: must be <= 1, got 1.5"),
    ("testbed.run", ["--csi", "guessed"], "--csi: 'guessed' is not one of ['measured', 'configured']"),
    ("testbed.run", ["--protocol", "fast"], "--protocol: 'fast' is not one of"),
    ("testbed.run", ["--frobnicate"], "unrecognized arguments: --frobnicate"),
    ("testbed.run", ["--edge", "10.0.0.2:5555"], "--edge must be tcp://HOST:PORT, got '10.0.0.2:5555'"),
    ("testbed.run", ["--edge", "tcp://10.0.0.2:5555", "--csi", "configured"],
     "--csi configured needs an emulated link"),
    ("testbed.run", ["--config", "/nonexistent/config.toml"], "/nonexistent/config.toml: [Errno 2]"),
    ("testbed.run", ["--dataset", "nope"], "--dataset nope: unknown dataset 'nope'; expected spec-bench[:CATEGORY"),
    ("testbed.run", ["--dataset", "spec-bench:qa,poetry"], "--dataset spec-bench:qa,poetry: unknown category 'poetry'"),
    ("testbed.run", ["--dataset", "gsm8k:qa"], "--dataset gsm8k:qa: only spec-bench takes categories"),
    ("testbed.run", ["--dataset", "custom:/nonexistent/p.jsonl"],
     "--dataset custom:/nonexistent/p.jsonl: custom needs an existing file (custom:FILE)"),
    ("testbed.run", ["--dataset", "gsm8k", "--prompts-file", "p.jsonl"],
     "--dataset gsm8k and --prompts-file p.jsonl both name the prompts; give one"),
    ("testbed.run", ["--stream-every-tokens", "0"], "--stream-every-tokens: must be >= 1, got 0"),
    ("testbed.run", ["--stream-every-tokens", "x"], "--stream-every-tokens: expected int, got 'x'"),
    ("testbed.run", ["--stream-every-ms", "0"], "--stream-every-ms: must be > 0, got 0"),
    ("testbed.run", ["--stream-every-ms", "-5"], "--stream-every-ms: must be > 0, got -5"),
    ("testbed.run", ["--stream-every-ms", "nan"], "--stream-every-ms: must be > 0, got nan"),
    ("testbed.run", ["--stream-every-ms", "inf"], "--stream-every-ms: must be < 3.6e+06, got inf"),
    ("testbed.ue", ["--stream-every-tokens", "-1"], "--stream-every-tokens: must be >= 1, got -1"),
    ("testbed.ue", ["--stream-every-ms", "soon"], "--stream-every-ms: expected float, got 'soon'"),
    ("testbed.ue", ["--draft-len", "0"], "--draft-len: must be >= 1 (or auto), got 0"),
    ("testbed.ue", ["--prompts", "0"], "--prompts: must be >= 1, got 0"),
    ("testbed.ue", ["--probe-ms", "0"], "--probe-ms: must be > 0, got 0"),
    ("testbed.ue", ["--probe-bytes", "2000000"], "--probe-bytes: must be <= 1.04858e+06, got 2e+06"),
    ("testbed.ue", ["--rejection-threshold", "2"], "--rejection-threshold: must be <= 1, got 2"),
    ("testbed.ue", ["--recv-timeout-s", "0"], "--recv-timeout-s: must be > 0, got 0"),
    ("testbed.serve", ["--tau", "1.5"], "--tau: must be <= 1, got 1.5"),
    ("testbed.serve", ["--tau", "-0.1"], "--tau: must be >= 0, got -0.1"),
    ("testbed.serve", ["--bind", "127.0.0.1:5594"],
     "--bind: expected the form tcp://0.0.0.0:5556, got '127.0.0.1:5594'"),
    ("testbed.serve", ["--max-draft-len", "0"], "--max-draft-len: must be >= 1, got 0"),
    ("testbed.load", ["--ues", "0"], "--ues: must be >= 1, got 0"),
    ("testbed.load", ["--epsilon", "2"], "--epsilon: must be <= 1, got 2"),
    ("channel.emulator", ["--forward", "127.0.0.1:5555", "--per", "1.5"], "--per: must be < 1, got 1.5"),
    ("channel.emulator", ["--forward", "127.0.0.1:5555", "--rate-mbps", "0"], "--rate-mbps: must be > 0, got 0"),
]


def error_of(prog: str, argv: list[str], capsys) -> tuple[int, str]:
    """Run a CLI's main in-process: (exit status, its stderr)."""
    with pytest.raises(SystemExit) as e:
        MAINS[prog](argv)
    return e.value.code, capsys.readouterr().err


@pytest.mark.parametrize("prog, argv, message", PARSE_ERRORS, ids=[f"{p} {' '.join(a)}" for p, a, _ in PARSE_ERRORS])
def test_bad_values_are_one_line_and_exit_2(prog, argv, message, capsys):
    code, err = error_of(prog, argv, capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"python -m {prog}: error: {message}"), err


def test_help_names_the_program_as_users_type_it(capsys):
    for prog, main in MAINS.items():
        with pytest.raises(SystemExit):
            main(["--help"])
        assert capsys.readouterr().out.startswith(f"usage: python -m {prog} "), prog


def test_a_malformed_prompts_file_names_its_line_and_a_rerun_is_not_refused(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "What is 2+2?", "answer": 4}\n{"prompt": "broken\n')
    argv = ["--prompts-file", str(bad), "--out", str(tmp_path / "out")]
    for _ in range(2):  # the second: the first run's config files do not make --out "not empty"
        code, err = error_of("testbed.run", argv, capsys)
        assert code == 2 and err == f"python -m testbed.run: error: {bad}:2: not JSON " \
                                    "(Unterminated string starting at: line 1 column 12 (char 11))\n"


def test_a_malformed_dataset_row_is_one_line_before_anything_is_written(tmp_path, capsys):
    bad = tmp_path / "custom.jsonl"
    bad.write_text('{"prompt": "Hello"}\n{"text": "no prompt"}\n')
    code, err = error_of("testbed.run", ["--dataset", f"custom:{bad}", "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and err == f"python -m testbed.run: error: {bad}:2: needs a non-empty 'prompt' text\n"
    assert not (tmp_path / "out").exists()


def test_csi_configured_without_an_emulated_link_is_refused_by_the_ue(tmp_path, capsys):
    code, err = error_of("testbed.ue", ["--csi", "configured", "--out", str(tmp_path)], capsys)
    assert code == 2 and err.endswith("python -m testbed.ue: error: --csi configured needs an emulated link "
                                      "(--link-json); on a real link use --csi measured\n")


def test_a_bad_drafter_head_is_refused_by_the_ue_before_its_drafter_loads(tmp_path, capsys, monkeypatch):
    def no_load(*_):
        raise AssertionError("the drafter loaded before --drafter-head was checked")
    from testbed.live.ue import drafting
    monkeypatch.setattr(drafting, "load_with_head", no_load)
    code, err = error_of("testbed.ue", ["--drafter-head", str(tmp_path / "nope"), "--out", str(tmp_path)], capsys)
    assert code == 2 and "not a feature head directory" in err and err.count("\n") == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_an_unreachable_edge_says_it_waits_then_fails_with_exit_2(tmp_path, capsys):
    endpoint = f"tcp://127.0.0.1:{_closed_port()}"
    code, err = error_of("testbed.run", ["--edge", endpoint, "--retry-s", "1.5", "--recv-timeout-s", "0.3",
                                         "--prompts", "1", "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert f"waiting for {endpoint}: no answer yet (no reply within 0.3 s" in err
    assert f"python -m testbed.run: error: REFERENCE of session run-ref to the edge at {endpoint}: no reply" in err


def test_serve_on_a_port_in_use_is_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, err = error_of("testbed.serve", ["--bind", f"tcp://127.0.0.1:{port}", "--head", "none"], capsys)
    assert code == 2 and err.startswith(f"python -m testbed.serve: error: --bind tcp://127.0.0.1:{port}: cannot bind")
    assert "choose another port" in err and err.count("\n") == 1


@pytest.fixture
def refusing_edge() -> Iterator[str]:
    """An 'edge' that answers PINGs and fails every OPEN with an ERROR that is neither a refusal nor retryable."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind("tcp://127.0.0.1:*")
    stop = threading.Event()

    def serve_forever() -> None:
        while not stop.is_set():
            if not sock.poll(50):
                continue
            peer, *frames = sock.recv_multipart()
            msg = decode(frames, Limits(vocab_size=2**20))
            if msg.type == MsgType.PING:
                payload = np.zeros(msg.header.get("reply_bytes", 0), np.uint8)
                reply = make(MsgType.PONG, msg.session, {"payload": payload}, seq=msg.header["seq"],
                             t_send=msg.header["t_send"])
            else:
                reply = error_message(msg.session, "internal", "this edge fails every session")
            sock.send_multipart([peer, *encode(reply)])

    thread = threading.Thread(target=serve_forever, daemon=True)
    thread.start()
    try:
        yield sock.getsockopt(zmq.LAST_ENDPOINT).decode()
    finally:
        stop.set()
        thread.join(5)
        sock.close(0)
        ctx.term()


@pytest.mark.slow
def test_a_ue_run_whose_every_prompt_failed_exits_1(refusing_edge, tmp_path: Path, capsys):
    code, err = error_of("testbed.ue", ["--connect", refusing_edge, "--prompts", "2", "--no-reference",
                                        "--probe-bytes", "0", "--out", str(tmp_path)], capsys)
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("python -m testbed.ue: error: every prompt failed (2); the first: ")
    assert "this edge fails every session" in err
    assert (tmp_path / "config.toml").exists()  # saved even so


def test_a_bad_pass_rows_file_is_refused_before_any_process_starts(tmp_path, capsys):
    bad = tmp_path / "plan.json"
    bad.write_text('{"target_pad_plan": {"4": 2}}')
    for path, word in ((tmp_path / "nope.json", "No such file"), (bad, "pad each count to a larger one")):
        code, err = error_of("testbed.run", ["--pass-rows", str(path), "--out", str(tmp_path / "o")], capsys)
        assert code == 2 and err.count("\n") == 1 and f"pass-rows benchmark {path}: " in err and word in err, err
    assert not (tmp_path / "o").exists()


def test_a_protocol_the_head_cannot_decide_is_refused_before_any_process_starts(tmp_path, capsys):
    code, err = error_of("testbed.run", ["--protocol", "greedy,ef", "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "--protocol ef cannot be served by the head" in err and "toy-pair/head" in err and "(fh, sh)" in err
    assert not (tmp_path / "o").exists()


def test_unserved_reads_the_descriptions():
    from protocols.registry import unserved
    assert unserved(["greedy", "ef", "fh", "sh", "server"], ("h_draft", "h_target", "csi")) == ["ef"]
    assert unserved(["ef", "fh"], ("h_target", "csi")) == []
