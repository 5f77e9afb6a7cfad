"""``python -m testbed.serve``: the edge server (the code lives in ``testbed.live.edge.serve``)."""
from testbed.live.edge.serve import main

if __name__ == "__main__":
    main()
