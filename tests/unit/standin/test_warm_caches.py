"""Warm start-up caches on the stand-in (SIMULATED): a launch that finds an earlier launch's
kernel markers and page-cache marker in its cache directory starts faster by the profile's
fractions; without a cache directory it is always cold and writes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bwtune.standin import startup_cache
from bwtune.standin.profile import load_profile, shipped_profiles

from .conftest import BASE_FLAGS, MODEL, Server

RESOLVED = {
    "moe-runner-backend": "flashinfer_cutlass",
    "fp4-gemm-backend": "flashinfer_cudnn",
    "attention-backend": "triton",
}


def env_for(cache: Path) -> dict[str, str]:
    return {startup_cache.CACHE_ENV: str(cache)}


@pytest.mark.parametrize("name", sorted(shipped_profiles()))
def test_a_second_launch_is_shorter_by_the_profiles_fractions(name: str, tmp_path: Path) -> None:
    profile = load_profile(name)
    # Both shipped profiles say what the caches save (an unset fraction would save nothing).
    assert 0 < profile.cached_capture_fraction < 1 and 0 < profile.page_cache_load_fraction < 1
    cold = startup_cache.plan(profile, RESOLVED, str(MODEL), env_for(tmp_path))
    assert not cold.weights_cached and not cold.kernels_cached
    assert (cold.weight_load_s, cold.capture_s) == (profile.weight_load_s, profile.graph_capture_s)

    assert startup_cache.remember_weights(cold) is None
    assert startup_cache.remember_kernels(cold, profile.gpu.arch) is None
    warm = startup_cache.plan(profile, RESOLVED, str(MODEL), env_for(tmp_path))
    assert warm.weights_cached and warm.kernels_cached
    assert warm.weight_load_s == pytest.approx(profile.weight_load_s * profile.page_cache_load_fraction)
    assert warm.capture_s == pytest.approx(profile.graph_capture_s * profile.cached_capture_fraction)


def test_one_new_kernel_or_another_checkpoint_is_not_cached(tmp_path: Path) -> None:
    profile = load_profile()
    first = startup_cache.plan(profile, RESOLVED, str(MODEL), env_for(tmp_path))
    startup_cache.remember_weights(first)
    startup_cache.remember_kernels(first, profile.gpu.arch)
    # Another MoE runner: its kernels were never built, the checkpoint is still in the page cache.
    other = startup_cache.plan(
        profile, {**RESOLVED, "moe-runner-backend": "marlin"}, str(MODEL), env_for(tmp_path)
    )
    assert other.weights_cached and not other.kernels_cached
    assert other.capture_s == profile.graph_capture_s
    # Speculative decoding adds its own kernels (on/off is one of the keys).
    spec = startup_cache.plan(
        profile, {**RESOLVED, "speculative-algorithm": "NEXTN"}, str(MODEL), env_for(tmp_path)
    )
    assert not spec.kernels_cached
    # Another checkpoint was never read: cold load, warm kernels.
    elsewhere = startup_cache.plan(profile, RESOLVED, str(tmp_path / "other-model"), env_for(tmp_path))
    assert not elsewhere.weights_cached and elsewhere.kernels_cached


def test_the_page_cache_does_not_outlive_a_reboot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile = load_profile()
    first = startup_cache.plan(profile, RESOLVED, str(MODEL), env_for(tmp_path))
    startup_cache.remember_weights(first)
    monkeypatch.setattr(startup_cache, "boot_id", lambda: "another-boot")
    again = startup_cache.plan(profile, RESOLVED, str(MODEL), env_for(tmp_path))
    assert not again.weights_cached and again.weight_load_s == profile.weight_load_s


def test_without_a_cache_directory_every_launch_is_cold_and_nothing_is_written(tmp_path: Path) -> None:
    profile = load_profile()
    cold = startup_cache.plan(profile, RESOLVED, str(MODEL), {})
    assert cold.markers is None
    assert startup_cache.remember_weights(cold) is None
    assert startup_cache.remember_kernels(cold, "sm120") is None
    again = startup_cache.plan(profile, RESOLVED, str(MODEL), {})
    assert (again.weight_load_s, again.capture_s) == (profile.weight_load_s, profile.graph_capture_s)
    assert "cold start" in again.describe(profile)[0]


def test_a_profile_without_the_fractions_saves_nothing_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    shipped = Path(load_profile().path).read_text(encoding="utf-8")
    bare = tmp_path / "bare.yml"
    bare.write_text(re.sub(r"^  (cached_capture|page_cache_load)_fraction:.*\n", "", shipped, flags=re.M))
    profile = load_profile(str(bare))
    assert (profile.cached_capture_fraction, profile.page_cache_load_fraction) == (1.0, 1.0)
    bad = tmp_path / "bad.yml"
    bad.write_text(shipped.replace("cached_capture_fraction: 0.25", "cached_capture_fraction: 1.5"))
    with pytest.raises(ValueError, match=r"startup.cached_capture_fraction = 1.5 must be in \[0, 1\]"):
        load_profile(str(bad))


def _cache_line(server: Server) -> str:
    """The stand-in's log line on what its start-up caches saved."""
    return next(x for x in server.log().splitlines() if "start-up cache" in x)


def test_the_standin_logs_the_simulated_saving_on_its_second_start(
    launch: Callable[..., Server], tmp_path: Path
) -> None:
    profile = load_profile()
    env = env_for(tmp_path / "cache")
    first = launch(*BASE_FLAGS, env=env)
    first.wait_healthy()
    first.stop()
    assert "checkpoint not in the page cache: load 180.0 s" in _cache_line(first)
    assert "kernels not all cached (" in _cache_line(first)
    second = launch(*BASE_FLAGS, env=env)
    second.wait_healthy()
    line = _cache_line(second)
    load = profile.weight_load_s * profile.page_cache_load_fraction
    capture = profile.graph_capture_s * profile.cached_capture_fraction
    assert f"load {load:.1f} s of {profile.weight_load_s:.1f} s" in line, line
    assert f"capture {capture:.1f} s of {profile.graph_capture_s:.1f} s" in line, line
    assert "moe-runner-backend=flashinfer_cutlass" in line and "speculative=off" in line
