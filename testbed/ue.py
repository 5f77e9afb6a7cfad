"""``python -m testbed.ue``: one UE process (the code lives in ``testbed.live.ue``)."""
from testbed.live.ue import main

if __name__ == "__main__":
    main()
