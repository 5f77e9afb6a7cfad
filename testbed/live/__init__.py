"""The live processes, a room each: the UE (ue/), the edge (edge/), the orchestrator that starts them over a link
(orchestrate/: testbed.run, --continue, child processes), and the plumbing both ends share (common/).  Imports go one
way: orchestrate -> ue, edge -> common."""
