"""The live processes: the orchestrator (run), the edge (serve), the UE (ue), and their plumbing."""
