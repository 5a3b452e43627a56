"""The shard tools: a shard read through the runtime, and inspect, verify, desk-check and diff."""
