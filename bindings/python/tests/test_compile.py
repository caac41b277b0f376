"""weft_graph_compile without a GPU: NVRTC + nvJitLink to a cubin, with and without the kernel cache."""
import pytest

import weft
from helpers import build_decoder_block, build_mlp


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_compile_without_cache_gives_a_sane_report(arch):
    r = build_mlp().compile(arch, disable_cache=True)
    assert isinstance(r, weft.CompileReport)
    assert r.num_tasks > 0 and r.num_events > 0 and r.num_queues > 0
    assert r.cubin_bytes > 1000 and r.arena_bytes >= 0
    assert not r.cache_hit and r.compile_ms > 0 and r.total_ms >= r.compile_ms
    assert len(r.key) == 32 and int(r.key, 16) >= 0


def test_num_sms_sets_the_queue_count():
    assert build_mlp().compile("sm_90a", num_sms=7, disable_cache=True).num_queues == 7


def test_cache_hit_on_the_second_compile(tmp_path, monkeypatch):
    monkeypatch.setenv("WEFT_CACHE_DIR", str(tmp_path / "cache"))
    g = build_decoder_block()
    first = g.compile("sm_90a")
    second = g.compile("sm_90a")
    assert second.key == first.key
    assert second.cache_hit and second.compile_ms == 0


def test_key_depends_on_the_arch():
    g = build_mlp()
    assert g.compile("sm_90a", disable_cache=True).key != g.compile("sm_80", disable_cache=True).key
