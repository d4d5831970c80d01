"""The mirror job: `writer` (`MirrorWriter`) -> `changelog` -> `compaction` (+ `keys`, `compactor`),
and `view` (the current state between compactions)."""
