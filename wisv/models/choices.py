"""Names the model flags choose among, apart from the loader (no torch here: config dataclasses import light)."""

DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")  # --dtype: auto is default_dtype(device)
