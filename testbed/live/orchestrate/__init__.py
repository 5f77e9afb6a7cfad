"""The orchestrator (testbed.run): its child processes, placement and link, prompts, interrupts, and --continue."""
