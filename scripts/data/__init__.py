"""Dataset and prompt makers: the task pools under ``wisv/assets/`` (QA, long form, the broad suite, distillation and
calibration prompts; the Magpie prompts, drawn from the target itself, are made by ``scripts/train/magpie.py``).
Seeded and offline: run again, they write the same files."""
