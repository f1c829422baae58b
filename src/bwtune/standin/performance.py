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
    distribution: list[tuple[int, float]]  # at a running batch of 1
    mean_accept_length: float  # at a running batch of 1
    model: Speculative | None = None  # the profile's, for the batch-dependent figures
    cap: int = 0  # tokens per verify step at most (steps + 1)

    def distribution_at(self, batch: int) -> list[tuple[int, float]]:
        if self.model is None or batch <= 1:
            return self.distribution
        return self.model.distribution(self.cap, batch)

    def mean_accept_length_at(self, batch: int) -> float:
        """Tokens per verify step at this running batch: the accept rate falls with the batch."""
        if self.model is None or batch <= 1:
            return self.mean_accept_length
        return self.model.mean_accept_length(self.cap, batch)

    def extra_ms(self, batch: int) -> float:
        """Draft and verify work a running batch adds to a verify step past batch 1's (ms,
        before the config's own step factor)."""
        if self.model is None or batch <= 1:
            return 0.0
        tokens = (batch - 1) * (self.num_draft_tokens - 1) - self.model.verify_knee_tokens
        return self.model.draft_cost_ms_per_token * max(0.0, tokens)

    def draw(self, rng: random.Random, batch: int = 1) -> int:
        dist = self.distribution_at(batch)
        x = rng.random()
        for tokens, p in dist:
            x -= p
            if x < 0:
                return tokens
        return dist[-1][0]


@dataclass(frozen=True)
class ConfigPerformance:
    profile: Profile
    step_factor: float
    prefill_tokens_per_s: float
    spec: SpecConfig | None
    reasons: list[str]  # why this config is as fast as it is (shown in /server_info)
    adjust_factor: float = 1.0  # the profile's adjustments alone (step_factor without speculative)

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
            model = profile.speculative
            if model.draft_cost_ms_per_token or model.accept_halving_batch:
                reasons.append(
                    f"speculative under load: +{model.draft_cost_ms_per_token:g} ms per draft token of "
                    f"the running requests past the first beyond {model.verify_knee_tokens:g}; "
                    f"accepted drafts x H/(H + batch - 1), H = {model.accept_halving_batch}"
                )
        adjust = factor / (profile.speculative.step_factor(spec.num_steps) if spec is not None else 1.0)
        return cls(profile, factor, profile.prefill_tokens_per_s / prefill_factor, spec, reasons, adjust)

    def step_seconds(self, batch: int) -> float:
        ms = self.profile.decode_step_ms(batch) * self.step_factor
        if self.spec is not None:
            ms += self.spec.extra_ms(batch) * self.adjust_factor
        return ms / 1000.0

    def prefill_seconds(self, tokens: int) -> float:
        return self.profile.prefill_overhead_ms / 1000.0 + tokens / self.prefill_tokens_per_s

    def mean_tokens_per_step(self, batch: int = 1) -> float:
        return self.spec.mean_accept_length_at(batch) if self.spec else 1.0

    def decode_tok_s_per_request(self, batch: int) -> float:
        return self.mean_tokens_per_step(batch) / self.step_seconds(batch)


def spec_crossover_batch(profile: Profile, flags: dict[str, Any], max_batch: int = 4096) -> float | None:
    """The running batch above which these flags' speculative decoding decodes slower than
    the same flags without it (tokens per second per request, hence in total), linear
    between the integer batches around the sign change; None when it wins up to max_batch
    (or the flags have no speculative decoding)."""
    spec = ConfigPerformance.for_flags(profile, flags)
    if spec.spec is None:
        return None
    off_flags = {k: v for k, v in flags.items() if not str(k).startswith("speculative-")}
    off = ConfigPerformance.for_flags(profile, off_flags)

    def gain(batch: int) -> float:
        return spec.decode_tok_s_per_request(batch) / off.decode_tok_s_per_request(batch) - 1.0

    prev = gain(1)
    if prev <= 0:
        return 1.0
    for batch in range(2, max_batch + 1):
        now = gain(batch)
        if now <= 0:
            return batch - 1 + prev / (prev - now)
        prev = now
    return None


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
    return SpecConfig(
        algorithm, steps, topk, drafts, spec.distribution(cap), spec.mean_accept_length(cap), spec, cap
    )
