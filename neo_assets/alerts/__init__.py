"""Alert delivery: sinks (webhook, JSONL file), the retrying delivery loop, event reading."""
