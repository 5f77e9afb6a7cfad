"""The edge: its process (serve), settings (serveconfig), message handling (edgeserver), batching, admission,
intake bounds, the receiver thread, the commit journal, references and rate-limited logs."""
