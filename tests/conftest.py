"""Test-wide settings: one torch thread (tiny models run fastest single-threaded, and CI has 2 cores)."""
import torch

torch.set_num_threads(1)
