"""``python -m testbed.simulate``: the trace-driven simulator (the code lives in ``testbed.sim.cli``)."""
from testbed.sim.cli import main

if __name__ == "__main__":
    main()
