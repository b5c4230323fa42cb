"""The bf16-without-hardware warning: flags read from /proc/cpuinfo text, when it speaks, and that opid-sft,
opid-eval and opid-train print it before they start work (with the CPU's flags replaced, so that the test says
the same on every machine)."""

from __future__ import annotations

import pytest

from opid_rllib import hardware
from opid_rllib.hardware import bf16_cpu_warning, cpu_flags, cpuinfo_value, numerics_record

X86 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\nbogomips\t: 4890\n"
ARM = "processor\t: 0\nFeatures\t: fp asimd bf16 sve\nCPU part\t: 0xd40\n"
NO_BF16 = frozenset({"avx", "avx2", "fma"})


def test_flags_from_x86_and_arm_text_and_none_when_absent():
    assert cpu_flags(X86) == frozenset({"fpu", "sse2", "avx", "avx2", "fma"})
    assert "bf16" in cpu_flags(ARM)
    assert cpu_flags("processor\t: 0\nmodel name\t: something\n") is None
    assert cpuinfo_value(("vendor_id",), X86) == "AuthenticAMD" and cpuinfo_value(("model name",), ARM) is None


def test_warns_only_for_bf16_on_a_cpu_whose_flags_lack_it():
    msg = bf16_cpu_warning("bfloat16", flags=NO_BF16)
    assert msg and "--dtype float32" in msg and "AVX512-BF16" in msg
    assert bf16_cpu_warning("bf16", flags=NO_BF16) == msg
    for flag in ("avx512_bf16", "amx_bf16", "bf16"):
        assert bf16_cpu_warning("bfloat16", flags=NO_BF16 | {flag}) is None, flag
    assert bf16_cpu_warning("bfloat16", flags=cpu_flags(ARM)) is None
    assert bf16_cpu_warning("float32", flags=NO_BF16) is None
    assert bf16_cpu_warning("bfloat16", on_cpu=False, flags=NO_BF16) is None  # a GPU does the work


def test_numerics_record_names_the_cpu_its_bf16_flags_and_the_onednn_isa_cap(monkeypatch):
    import torch

    amx = "model name\t: Intel(R) Xeon(R) Processor\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    monkeypatch.delenv("DNNL_MAX_CPU_ISA", raising=False)
    rec = numerics_record(amx)
    assert rec["cpu_model"] == "Intel(R) Xeon(R) Processor" and rec["bf16_flags"] == ["amx_bf16", "avx512_bf16"]
    assert rec["onednn_max_cpu_isa"] is None and rec["torch_threads"] == torch.get_num_threads()
    assert rec["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert numerics_record(X86)["bf16_flags"] == [] and numerics_record("processor\t: 0\n")["bf16_flags"] is None
    monkeypatch.setenv("DNNL_MAX_CPU_ISA", "AVX512_CORE_BF16")
    assert numerics_record(amx)["onednn_max_cpu_isa"] == "AVX512_CORE_BF16"


def test_unknown_flags_say_nothing(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda text=None: None)
    assert bf16_cpu_warning("bfloat16") is None


@pytest.fixture
def no_bf16_cpu(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda text=None: NO_BF16)


def test_opid_sft_warns_before_it_resolves_the_model(no_bf16_cpu, tmp_path, capsys):
    from opid_rllib.cli.sft import main

    args = ["--env", "alfworld", "--model", str(tmp_path / "no_such_model"), "--out", str(tmp_path / "out"),
            "--tasks", "1"]
    assert main(args + ["--dtype", "bfloat16"]) == 2
    err = capsys.readouterr().err
    assert "opid-sft: warning: --dtype bfloat16 on a CPU without AVX512-BF16" in err and "error:" in err
    assert main(args) == 2 and "warning" not in capsys.readouterr().err  # float32: nothing to say


def test_opid_eval_warns_before_it_plays(no_bf16_cpu, capsys):
    from opid_rllib.cli.eval import main

    # --env-kwargs [1] stops it at its first check, after the warning
    assert main(["--model", "tiny", "--dtype", "bfloat16", "--env-kwargs", "[1]"]) == 2
    assert "opid-eval: warning: --dtype bfloat16" in capsys.readouterr().err


def test_opid_train_warns_unless_learners_hold_gpus(no_bf16_cpu, capsys):
    from opid_rllib.cli.train import main

    assert main(["--model", "tiny", "--dtype", "bfloat16", "--plan"]) == 0
    assert "opid-train: warning: --dtype bfloat16" in capsys.readouterr().err
    assert main(["--model", "tiny", "--dtype", "bfloat16", "--num-gpus-per-learner", "1", "--plan"]) == 0
    assert "warning" not in capsys.readouterr().err
