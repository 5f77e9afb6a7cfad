"""The edge's serving side: verification engines, batching and scheduling."""
