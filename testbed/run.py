"""``python -m testbed.run``: start the edge and the UEs and run the prompts over the link (the code lives
in ``testbed.live.orchestrate.run``)."""
from testbed.live.orchestrate.run import main

if __name__ == "__main__":
    main()
