"""``python -m testbed.ue``: one UE process (the code lives in ``testbed.live.ue.ue``)."""
from testbed.live.ue.ue import main

if __name__ == "__main__":
    main()
