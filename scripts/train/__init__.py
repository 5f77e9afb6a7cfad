"""Recipes that build the shipped assets, run by the project (the Makefile's targets): the toy pair, the SmolLM2
drafter's distillation (its sources, cache and state), the EAGLE-style feature head, WISP's rejection and WDT
predictors; and the studies of those recipes (the drafter's learning curve and AAL ceiling).  Seeded and resumable."""
