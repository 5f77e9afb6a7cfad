"""``python -m testbed.load``: N emulated UEs with mixed SLOs against one batching edge (testbed/load/cli.py)."""
from testbed.load.cli import main

if __name__ == "__main__":
    main()
