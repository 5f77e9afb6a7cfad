"""``python -m testbed.keys DIR``: write an edge and a client CURVE key pair for ``serve``/``ue``/``run --auth DIR``.

Layout: ``DIR/edge.key`` and ``DIR/edge.key_secret`` (the edge's pair), ``DIR/client.key`` and
``DIR/client.key_secret`` (the UE's pair), ``DIR/clients/client.key`` (the public keys the edge accepts; add another
UE's ``client.key`` there under any ``NAME.key``).  The edge host needs ``edge.key_secret`` and ``clients/``; a UE
host needs ``edge.key`` and ``client.key_secret``.  Keep the ``*.key_secret`` files private.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import config
from testbed.live.common.auth import write_keys


@dataclass
class KeysConfig:
    """Where to write the keys."""

    dir: str = field(default="keys", metadata={"positional": True})  # directory for the key files (made if missing)
    overwrite: bool = False  # replace the keys already in DIR (edges and UEs using the old ones are then refused)


def parse_args(argv: list[str] | None = None) -> KeysConfig:
    return config.parse(KeysConfig, argv, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> None:
    cfg = parse_args(argv)
    try:
        paths = write_keys(cfg.dir, cfg.overwrite)
    except (FileExistsError, OSError) as e:
        print(f"testbed.keys: error: {e}", file=sys.stderr)
        sys.exit(2)
    for p in paths:
        print(p)
    print(f"edge: python -m testbed.serve --auth {cfg.dir} ...; UE: python -m testbed.ue --auth {cfg.dir} ...")


if __name__ == "__main__":
    main()
