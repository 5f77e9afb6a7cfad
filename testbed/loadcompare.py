"""``python -m testbed.loadcompare``: compare two load sweeps on the tightest SLO class (the code lives in
``testbed.load.compare``)."""
from testbed.load.compare import main

if __name__ == "__main__":
    main()
