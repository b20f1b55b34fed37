"""Triage on realistic SGLang / vLLM / PyTorch / NCCL / FlashInfer log excerpts."""

from __future__ import annotations

import re

import pytest

from campaign.domain.models import FailureClass
from tools.server.triage import TriageRule, classify

FC = FailureClass

SGLANG_OOM = """\
[2025-06-01 10:00:01 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=10.21 GB
[2025-06-01 10:00:02 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=1.02 GB
Traceback (most recent call last):
  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 301, in capture
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 MiB. GPU 0 has a total capacity of 95.00 GiB of which 210.00 MiB is free.
[2025-06-01 10:00:03] Received sigquit from a child process. It usually means the child failed."""

EP_ASSERT_THEN_OOM = """\
[2025-06-01 11:00:00 TP3] Init torch distributed begin.
[2025-06-01 11:00:09 TP3] Scheduler hit an exception: Traceback (most recent call last):
  File "/sgl/python/sglang/srt/managers/expert_location.py", line 88, in from_model_config
    assert expert_location_metadata is not None
AssertionError
[2025-06-01 11:00:10 TP5] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.
[2025-06-01 11:00:10] Received sigquit from a child process."""

OOM_THEN_ASSERT = """\
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB.
During handling of the above exception, another exception occurred:
AssertionError: req_to_token_pool is None"""

FLASHINFER_SM120 = """\
[TP0] Using FlashInfer allreduce fusion
ninja: Entering directory `/root/.cache/flashinfer/120a/cached_ops'
[1/3] /usr/local/cuda/bin/nvcc -gencode=arch=compute_120a,code=sm_120a -c trtllm_allreduce_fusion.cu
nvcc fatal   : Unsupported gpu architecture 'compute_120a'
ninja: build stopped: subcommand failed.
RuntimeError: Ninja build failed. Ninja output:"""

SYMM_MEM = """\
[TP0] Enabling torch symmetric memory all-reduce
RuntimeError: SymmetricMemory: device capability sm_120 is not in the supported arch table (sm_90, sm_100)"""

NO_KERNEL_IMAGE = "RuntimeError: CUDA error: no kernel image is available for execution on the device"

NCCL_TREE_GRAPH = """\
[TP0] NCCL_ALGO=Tree
[TP0] Capture cuda graph begin.
RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2
ncclUnhandledCudaError: Call to CUDA function failed.
Last error:
Cuda failure 'operation not permitted when stream is capturing'"""

NCCL_PLAIN = """\
[TP2] Init torch distributed begin.
torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, internal error - please report this issue to the NCCL developers, NCCL version 2.21.5
ncclInternalError: Internal check failed."""

ARGPARSE = """\
usage: launch_server.py [-h] --model-path MODEL_PATH [--tokenizer-path TOKENIZER_PATH]
launch_server.py: error: unrecognized arguments: --enable-flashinfer-allreduce-fusionx"""

ARGPARSE_VALUE = """\
usage: api_server.py [-h] [--max-num-seqs MAX_NUM_SEQS]
api_server.py: error: argument --max-num-seqs: invalid int value: 'four'"""

PORT = """\
INFO:     Started server process [4242]
ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use"""

VLLM_KV = """\
(EngineCore_DP0 pid=18799) ERROR 10-08 20:33:48 [core.py:708] ValueError: To serve at least one request with the models's max seq len (40960), (5.62 GiB KV cache is needed, which is larger than the available KV cache memory (4.50 GiB).
(APIServer pid=18700) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"""

VLLM_DEAD = """\
(APIServer pid=1) INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK
(APIServer pid=1) ERROR [async_llm.py:480] AsyncLLM output_handler failed.
(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.
(APIServer pid=1) INFO:     127.0.0.1:5002 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error"""

VLLM_REQUESTED_SHUTDOWN = """\
(APIServer pid=1) INFO [launcher.py:99] Shutting down FastAPI HTTP server.
(APIServer pid=1) INFO [shutdown] API server: stopping engine client
(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."""

PLAIN_EXIT = "\n".join([f"[worker] step {i}" for i in range(30)] + ["Killed"])


@pytest.mark.parametrize(
    ("log", "exit_code", "expected"),
    [
        (SGLANG_OOM, 1, FC.oom),
        (EP_ASSERT_THEN_OOM, 1, FC.assertion),
        (OOM_THEN_ASSERT, 1, FC.oom),
        (FLASHINFER_SM120, 1, FC.jit_error),
        (SYMM_MEM, 1, FC.unsupported_arch),
        (NO_KERNEL_IMAGE, 1, FC.unsupported_arch),
        (NCCL_TREE_GRAPH, 1, FC.cuda_graph_incompatible),
        (NCCL_PLAIN, 1, FC.nccl_error),
        (ARGPARSE, 2, FC.bad_flag),
        (ARGPARSE_VALUE, 2, FC.bad_flag),
        (PORT, 1, FC.port_in_use),
        (VLLM_KV, 1, FC.oom),
        (VLLM_DEAD, 0, FC.engine_dead),
        (VLLM_REQUESTED_SHUTDOWN, 0, FC.exited),
        (PLAIN_EXIT, 137, FC.exited),
    ],
)
def test_rule_table(log: str, exit_code: int, expected: FailureClass) -> None:
    failure = classify(exit_code, log.splitlines())
    assert failure.failure_class == expected, failure.summary
    assert failure.exit_code == exit_code
    assert failure.evidence


def test_assertion_then_oom_keeps_both_lines_and_says_so() -> None:
    failure = classify(1, EP_ASSERT_THEN_OOM.splitlines())
    assert "AssertionError" in failure.evidence
    assert any("CUDA out of memory" in ln for ln in failure.evidence)
    assert "also seen: oom (after it)" in failure.summary
    assert "    assert expert_location_metadata is not None" in failure.evidence  # context, indentation kept


def test_evidence_holds_the_deciding_line_with_context() -> None:
    failure = classify(2, ARGPARSE.splitlines())
    assert failure.evidence[-1].endswith("--enable-flashinfer-allreduce-fusionx")
    assert failure.evidence[0].startswith("usage:")
    assert "unrecognized arguments" in failure.summary


def test_fallback_evidence_is_the_last_lines_and_names_the_signal() -> None:
    failure = classify(-9, PLAIN_EXIT.splitlines(), phase="load")
    assert failure.failure_class == FC.exited
    assert failure.evidence[-1] == "Killed"
    assert len(failure.evidence) == 15
    assert "signal 9" in failure.summary
    assert failure.phase == "load"


def test_empty_log_with_no_status() -> None:
    failure = classify(None, [])
    assert failure.failure_class == FC.exited
    assert "no exit status" in failure.summary
    assert failure.evidence == []


def test_jit_outranks_arch_whatever_the_order() -> None:
    lines = ["nvcc fatal   : Unsupported gpu architecture 'compute_120a'", "something else"]
    assert classify(1, lines).failure_class == FC.jit_error


def test_bad_flag_outranks_everything_it_causes() -> None:
    lines = ["AssertionError", "launch_server.py: error: unrecognized arguments: --foo"]
    assert classify(2, lines).failure_class == FC.bad_flag


def test_engine_profile_adds_rules() -> None:
    hang = TriageRule(FC.hang, re.compile(r"watchdog: scheduler stuck"), 5, "scheduler stuck")
    lines = ["AssertionError", "watchdog: scheduler stuck for 300s"]
    assert classify(1, lines).failure_class == FC.assertion
    failure = classify(1, lines, extra_rules=[hang])
    assert failure.failure_class == FC.hang
    assert "scheduler stuck" in failure.summary


def test_evidence_is_bounded_on_huge_logs() -> None:
    lines = ["torch.OutOfMemoryError: CUDA out of memory."] * 500
    failure = classify(1, lines)
    assert failure.failure_class == FC.oom
    assert len(failure.evidence) <= 12


def test_capture_that_runs_out_of_memory_is_oom_not_graph_incompatibility():
    from tools.server.triage import classify

    lines = [
        "[TP0] Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 3.53 GiB.",
        "[TP0] 1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
    ]
    assert classify(1, lines).failure_class.value == "oom"
    nccl = ["[TP0] Exception: Capture cuda graph failed: NCCL error: invalid usage"]
    assert classify(1, nccl).failure_class.value == "cuda_graph_incompatible"


def test_vllm_usage_text_is_not_a_jit_error_and_a_worker_shutdown_is_not_a_requested_one():
    from tools.server.triage import classify

    usage = [
        "usage: api_server.py [-h] [--jit-monitor-mode {error,warn}] [--max-num-seqs MAX_NUM_SEQS]",
        "api_server.py: error: argument --max-num-seqs: invalid int value: 'many'",
    ]
    f = classify(2, usage)
    assert f.failure_class.value == "bad_flag" and "jit" not in f.summary.lower()
    crash = [
        "(EngineCore_DP0) [shutdown] Executor: worker died unexpectedly",
        "ERROR vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
    ]
    assert classify(0, crash, phase="load").failure_class.value == "engine_dead"
    asked = ["[shutdown] API server: stopping engine client", "EngineDeadError: EngineCore encountered an issue."]
    assert classify(0, asked, phase="load").failure_class.value == "exited"


def test_the_first_root_cause_decides_and_its_consequences_do_not() -> None:
    """SGLang on sm_120: the ValueError decides, not the dead scheduler logged after it;
    a watchdog hang that then kills the scheduler is a hang; a hang logged before the
    OOM that caused it yields to the OOM."""
    from tools.engines import engine_profile

    sglang = engine_profile("sglang")
    cc = [
        "[2025-09-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "ValueError: Unsupported compute capability: 12.0",
        "[2025-09-01 10:00:01] Received sigquit from a child process. It usually means the child failed.",
    ]
    assert sglang.classify(1, cc).failure_class == FC.unsupported_arch
    watchdog = [
        "[2025-10-29 11:25:58 TP3] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
        "[2025-10-29 11:26:03] Rank 0 scheduler is dead. Please check if there are relevant logs.",
    ]
    assert sglang.classify(1, watchdog).failure_class == FC.hang
    rpc_then_oom = [
        "ERROR [core.py:502] TimeoutError: RPC call to execute_model timed out.",
        "(Worker_TP1) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    assert classify(1, rpc_then_oom).failure_class == FC.oom


def test_warnings_that_do_not_stop_the_server_are_not_signatures() -> None:
    from tools.engines import engine_profile
    from tools.server.triage import is_unmatched

    lines = [
        "WARNING FlashInfer top-p/top-k sampling unavailable: unsupported compute capability 7.5; falling back",
        "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845",
    ]
    assert is_unmatched(engine_profile("sglang").classify(1, lines))


@pytest.mark.parametrize(
    "line",
    [
        "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
        "ModuleNotFoundError: No module named 'vllm'",
        "Exception: flashinfer_python with minimum required version 0.2.5 is not installed. Please uninstall the old version",
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
        "huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-6604c5e0)",
        "ImportError: /usr/lib/python3/flash_attn_2_cuda.so: undefined symbol: _ZN3c105ErrorC2E",
    ],
)
def test_what_the_node_lacks_is_environment_and_outranks_what_it_causes(line: str) -> None:
    lines = [line, "ValueError: Model architectures ['LlavaForConditionalGeneration'] are not supported for now."]
    failure = classify(1, lines)
    assert failure.failure_class == FC.environment and "exited (after it)" in failure.summary


def test_a_warning_about_a_missing_library_does_not_decide() -> None:
    """vLLM warns when its custom ops do not load and goes on; the OOM that stops it decides."""
    lines = [
        "WARNING 06-09 10:00:00 [_custom_ops.py:21] Failed to import from vllm._C with "
        "ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    assert classify(1, lines).failure_class == FC.oom
