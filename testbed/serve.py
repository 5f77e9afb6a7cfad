"""``python -m testbed.serve``: the edge server (the code lives in ``testbed.live.serve``)."""
from testbed.live.serve import main

if __name__ == "__main__":
    main()
