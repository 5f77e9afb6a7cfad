"""The UE: its process (ue), settings (ueconfig), one round (ueround), the socket (client), its retries, and what
it keeps of an interrupted run (kept)."""
