"""The UE: its process (ue), settings (ueconfig), one round (ueround), the socket (client) and its retries."""
