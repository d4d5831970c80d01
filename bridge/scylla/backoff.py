"""Exponential backoff with jitter for retries after transient errors.

Delay of attempt n (1-based) is `min(max, base * 2**(n-1))`, scaled by a random factor in
`[1 - jitter, 1]` so that many groups failing together (a node restart) do not retry in step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    base_ms: int
    max_ms: int
    jitter: float = 0.2
    attempts: int = 0
    _random: random.Random = field(default_factory=random.Random, repr=False)

    def __post_init__(self) -> None:
        if self.base_ms <= 0 or self.max_ms < self.base_ms:
            raise ValueError(f"bad backoff bounds base={self.base_ms} ms, max={self.max_ms} ms")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter}")

    def next_delay_ms(self) -> float:
        """Count one more failure and return how long to wait before the next try."""
        self.attempts += 1
        exponent = min(self.attempts - 1, 62)
        delay = min(self.max_ms, self.base_ms * (2**exponent))
        return float(delay * (1 - self.jitter * self._random.random()))

    def reset(self) -> None:
        """A success: the next failure starts from the base delay again."""
        self.attempts = 0
