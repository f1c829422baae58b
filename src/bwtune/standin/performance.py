"""How fast one launch config runs on a profile's simulated GPU.

`ConfigPerformance.for_flags` applies the profile's adjustments (each with the reason it
states) to the baseline decode curve, and sets up speculative decoding when the flags ask
for it. `bwtune.standin.batch.predict_output_throughput` runs a config's performance through
the batch simulator the server uses, on a virtual clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from bwtune.standin.profile import Profile, Speculative

# SGLang's defaults for NEXTN/EAGLE when the speculative step flags are unset
# (server_args.py: auto-chosen steps 3, topk 1, draft tokens 4).
DEFAULT_SPEC_STEPS, DEFAULT_SPEC_TOPK = 3, 1


@dataclass(frozen=True)
class SpecConfig:
    algorithm: str
    num_steps: int
    topk: int
    num_draft_tokens: int
    distribution: list[tuple[int, float]]
    mean_accept_length: float

    def draw(self, rng: random.Random) -> int:
        x = rng.random()
        for tokens, p in self.distribution:
            x -= p
            if x < 0:
                return tokens
        return self.distribution[-1][0]


@dataclass(frozen=True)
class ConfigPerformance:
    profile: Profile
    step_factor: float
    prefill_tokens_per_s: float
    spec: SpecConfig | None
    reasons: list[str]  # why this config is as fast as it is (shown in /server_info)

    @classmethod
    def for_flags(cls, profile: Profile, flags: dict[str, Any]) -> ConfigPerformance:
        factor, prefill_factor = 1.0, 1.0
        reasons = [f"baseline: {profile.baseline}"]
        for adj in profile.adjustments:
            if adj.match.matches(flags):
                factor *= adj.step_factor
                prefill_factor *= adj.prefill_factor
                reasons.append(f"x{adj.step_factor:g} step time: {adj.why}")
        spec = _spec_config(profile.speculative, flags)
        if spec is not None:
            spec_factor = profile.speculative.step_factor(spec.num_steps)
            factor *= spec_factor
            reasons.append(
                f"speculative {spec.algorithm} {spec.num_steps}/{spec.topk}/{spec.num_draft_tokens}: "
                f"x{spec_factor:g} step time, mean accept length {spec.mean_accept_length:.2f} "
                f"({profile.speculative.source})"
            )
        return cls(profile, factor, profile.prefill_tokens_per_s / prefill_factor, spec, reasons)

    def step_seconds(self, batch: int) -> float:
        return self.profile.decode_step_ms(batch) * self.step_factor / 1000.0

    def prefill_seconds(self, tokens: int) -> float:
        return self.profile.prefill_overhead_ms / 1000.0 + tokens / self.prefill_tokens_per_s

    def mean_tokens_per_step(self) -> float:
        return self.spec.mean_accept_length if self.spec else 1.0

    def decode_tok_s_per_request(self, batch: int) -> float:
        return self.mean_tokens_per_step() / self.step_seconds(batch)


def max_running_requests(profile: Profile, perf: ConfigPerformance, flags: dict[str, Any]) -> int:
    """--max-running-requests, or SGLang's default: 48 with speculative decoding, else the profile's."""
    explicit = flags.get("max-running-requests")
    if explicit is not None:
        return int(explicit)
    return 48 if perf.spec else profile.default_max_running_requests


def _spec_config(spec: Speculative, flags: dict[str, Any]) -> SpecConfig | None:
    algorithm = flags.get("speculative-algorithm")
    if not algorithm:
        return None
    algorithm = str(algorithm).upper()
    steps = flags.get("speculative-num-steps")
    topk = flags.get("speculative-eagle-topk")
    drafts = flags.get("speculative-num-draft-tokens")
    steps = int(steps) if steps is not None else DEFAULT_SPEC_STEPS
    topk = int(topk) if topk is not None else DEFAULT_SPEC_TOPK
    # topk 1 forces draft tokens = steps + 1 (SGLang server_args.py).
    drafts = steps + 1 if topk == 1 or drafts is None else int(drafts)
    # With a tree (topk > 1) more candidates are verified, but one path is accepted:
    # at most steps + 1 tokens per verify step either way.
    cap = min(drafts, steps + 1)
    return SpecConfig(algorithm, steps, topk, drafts, spec.distribution(cap), spec.mean_accept_length(cap))
