"""vLLM 0.33.0's ``fused_moe_kernel`` and its tuned configs, taken from the vLLM wheel at run time.

Nothing of vLLM is kept in this repository. The wheel (``pip download --no-deps vllm==0.33.0``, see
bench/fetch_vllm.py) holds the kernel in ``vllm/model_executor/layers/fused_moe/fused_moe.py`` and the
per-device tuning tables in ``vllm/model_executor/layers/fused_moe/configs/*.json``; ``extract`` copies
those files, byte for byte, into ``bench/peers/vllm-0.33.0/`` (git-ignored) with a ``SOURCE.json``
naming the wheel, its sha256, and each file's path inside the wheel and sha256. A GPU machine without
network gets that folder with the run:

    python bench/peers/vllm_wheel.py                  # the wheel in bench/corpus/wheels/, else pip download
    python bench/peers/vllm_wheel.py --wheel W.whl    # a wheel you already have

``Peer`` runs only the functions the benchmark needs (listed in FUSED_MOE_FUNCTIONS and UTILS_FUNCTIONS),
each compiled from the extracted file with its own line numbers, so Triton reads the kernels' source
from it: the kernel, vLLM's launch of it, its expert assignment and its config choice (the shipped JSON
from ``configs/`` next to the file, else ``get_default_config``). ``triton`` and ``triton.language as
tl`` are their globals (vLLM's ``vllm.triton_utils`` re-exports exactly those); what else they take
from vLLM (``envs``, ``current_platform``, the logger, the device name, the CUDA alignment op) is stood
in for and recorded with the provenance. The modules themselves, which import all of vLLM, are never
executed.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import pathlib
import sys

VERSION = "0.33.0"
PEERS = pathlib.Path(__file__).resolve().parent
BENCH = PEERS.parent
TARGET = PEERS / f"vllm-{VERSION}"
MARKER = "SOURCE.json"
KERNEL_PATH = "vllm/model_executor/layers/fused_moe/fused_moe.py"
CONFIG_DIR = "vllm/model_executor/layers/fused_moe/configs/"
UTILS_PATH = "vllm/model_executor/layers/fused_moe/utils.py"
FUSED_MOE_FUNCTIONS = ("write_zeros_to_output", "fused_moe_kernel", "invoke_fused_moe_triton_kernel",
                       "_prepare_expert_assignment", "get_config_file_name", "get_moe_configs",
                       "get_default_config", "should_moe_wna16_use_cuda")
UTILS_FUNCTIONS = ("enable_swap_ab", "resolve_moe_use_td", "warn_if_moe_use_td_ineffective")


if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
import wheel_files  # noqa: E402  (the one unzip and file hash of the bench scripts)


def _wanted(name: str) -> bool:
    return name in (KERNEL_PATH, UTILS_PATH) or (name.startswith(CONFIG_DIR) and name.endswith(".json")
                                   and "/" not in name[len(CONFIG_DIR):])


def extract(wheel: pathlib.Path, target: pathlib.Path = TARGET) -> dict:
    """Copy the kernel file and the config JSONs out of ``wheel`` into ``target`` (atomically: a temp
    folder renamed into place); returns the content of its SOURCE.json."""
    wheel = pathlib.Path(wheel)
    if not wheel.name.startswith(f"vllm-{VERSION}-"):
        raise SystemExit(f"{wheel.name} is not a vllm {VERSION} wheel")

    def source_of(files: list[dict]) -> dict:
        if not any(f["path_in_wheel"] == KERNEL_PATH for f in files):
            raise SystemExit(f"{wheel.name} has no {KERNEL_PATH}")
        return {"project": "vllm", "version": VERSION, "wheel": wheel.name,
                "wheel_sha256": wheel_files.sha256_file(wheel), "licence": "Apache-2.0", "files": files}

    _, source = wheel_files.unpack(wheel, target, _wanted, (MARKER, source_of))
    return source


def find_wheel() -> pathlib.Path | None:
    """A vllm wheel of this version in bench/corpus/wheels/ (where bench/fetch_vllm.py downloads it)."""
    wheels = sorted((BENCH / "corpus" / "wheels").glob(f"vllm-{VERSION}-*.whl"))
    return wheels[0] if wheels else None


def source(target: pathlib.Path = TARGET) -> dict:
    """SOURCE.json of the extracted files (extracting them first from a wheel found on disk)."""
    marker = target / MARKER
    if not marker.is_file():
        wheel = find_wheel()
        if wheel is None:
            raise SystemExit(f"vLLM {VERSION}'s kernel is not extracted ({target} is missing) and no wheel is in "
                             f"{BENCH / 'corpus' / 'wheels'}: run `python bench/peers/vllm_wheel.py [--wheel W.whl]`")
        extract(wheel, target)
    return json.loads(marker.read_text())


def provenance(used: list[str] | None = None, target: pathlib.Path = TARGET) -> dict:
    """What a results file records: the wheel, its sha256, and the files used (path inside the wheel,
    sha256), checked against the bytes on disk."""
    src = source(target)
    by_path = {f["path_in_wheel"]: f for f in src["files"]}
    paths = [KERNEL_PATH] + sorted(set(used or []) - {KERNEL_PATH})
    files = []
    for p in paths:
        rec = by_path[p]
        actual = wheel_files.sha256_file(target / p)
        if actual != rec["sha256"]:
            raise SystemExit(f"{target / p} changed since it was extracted from {src['wheel']}")
        files.append(dict(rec))
    return {"project": "vllm", "version": src["version"], "wheel": src["wheel"], "wheel_sha256": src["wheel_sha256"],
            "licence": src["licence"], "files": files}


class _Logger:
    """Stands in for vLLM's logger: keeps the config files the loaded functions report using."""

    def __init__(self):
        self.config_files: list[str] = []

    def info_once(self, msg, *args, **kwargs):
        if msg.startswith("Using configuration from"):
            self.config_files.append(str(args[0]))

    def warning_once(self, msg, *args, **kwargs):
        pass


class _Platform:
    """Stands in for vLLM's ``current_platform``: CUDA (not ROCm, not XPU), the device's compute capability
    (9.0 without one)."""

    def __init__(self):
        import torch

        self.capability = (torch.cuda.get_device_capability() if torch.cuda.is_available() else (9, 0))

    def is_rocm(self):
        return False

    def is_cuda(self):
        return True

    def is_xpu(self):
        return False

    def is_device_capability(self, cap: int) -> bool:
        return self.capability[0] * 10 + self.capability[1] == cap


def _run_functions(path: pathlib.Path, names: tuple[str, ...], namespace: dict) -> dict:
    """Execute only the top-level ``def``s called ``names`` of ``path`` in ``namespace``."""
    tree = ast.parse(path.read_bytes(), filename=str(path))
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    missing = set(names) - {n.name for n in defs}
    if missing:
        raise SystemExit(f"{path} defines no {', '.join(sorted(missing))}")
    # Compiled with the file's own name and line numbers, so Triton reads each kernel's source from it.
    exec(compile(ast.Module(body=defs, type_ignores=[]), str(path), "exec"), namespace)  # noqa: S102
    return namespace


class Peer:
    """The functions of vLLM 0.33.0 the benchmark runs, loaded from the extracted wheel files.

    From fused_moe.py: ``fused_moe_kernel`` (a Triton JITFunction) and ``write_zeros_to_output``,
    ``invoke_fused_moe_triton_kernel`` (vLLM's launch: grid, EM, SWAP_AB rule), ``_prepare_expert_assignment``
    (the one-slot-per-block path when M*topk*4 <= E), ``get_moe_configs`` (the shipped per-device JSON) and
    ``get_default_config``; from utils.py ``enable_swap_ab`` and the tensor-descriptor switches.
    ``align_fn(topk_ids, block_m, E)`` stands in for vLLM's CUDA ``moe_align_block_size`` op (same output
    format); ``swap_override`` (None: vLLM's rule) forces SWAP_AB for the FP8 grid of the study.
    """

    def __init__(self, align_fn, target: pathlib.Path = TARGET):
        import functools
        import types

        import torch
        import triton
        import triton.language as tl

        source(target)
        self.target = target
        self.logger = _Logger()
        self.platform = _Platform()
        self.swap_override: bool | None = None
        envs = types.SimpleNamespace(VLLM_BATCH_INVARIANT=False, VLLM_TUNED_CONFIG_FOLDER=None,
                                     VLLM_TRITON_USE_TD=None)
        base = {"torch": torch, "triton": triton, "tl": tl, "os": os, "json": json, "functools": functools,
                "Any": object, "envs": envs, "logger": self.logger, "current_platform": self.platform}
        utils = dict(base, __name__="vllm.model_executor.layers.fused_moe.utils", __file__=str(target / UTILS_PATH),
                     _warned_moe_use_td_ineffective=False)
        _run_functions(target / UTILS_PATH, UTILS_FUNCTIONS, utils)

        def enable_swap_ab(block_m, block_n):
            if self.swap_override is not None:
                return self.swap_override
            return utils["enable_swap_ab"](block_m, block_n)

        def moe_align_block_size(topk_ids, block_m, num_experts, expert_map=None, **_):
            assert expert_map is None
            return align_fn(topk_ids, block_m, num_experts)

        def set_triton_allocator(device):
            raise RuntimeError("the tensor-descriptor path is off (VLLM_TRITON_USE_TD unset, not XPU)")

        kernel_file = target / KERNEL_PATH
        ns = {**base, "__name__": "vllm.model_executor.layers.fused_moe.fused_moe", "__file__": str(kernel_file),
              "next_power_of_2": triton.next_power_of_2, "get_device_name_as_file_name": lambda: "NVIDIA_H200",
              "enable_swap_ab": enable_swap_ab, "moe_align_block_size": moe_align_block_size,
              "set_triton_allocator": set_triton_allocator,
              **{k: utils[k] for k in UTILS_FUNCTIONS if k != "enable_swap_ab"}}
        _run_functions(kernel_file, FUSED_MOE_FUNCTIONS, ns)
        self.fused_moe_kernel = ns["fused_moe_kernel"]
        self.invoke_fused_moe_triton_kernel = ns["invoke_fused_moe_triton_kernel"]
        self.prepare_expert_assignment = ns["_prepare_expert_assignment"]
        self.get_moe_configs = ns["get_moe_configs"]
        self.get_default_config = ns["get_default_config"]
        self.enable_swap_ab = utils["enable_swap_ab"]

    def provenance(self) -> dict:
        """The wheel, its sha256, every file used (path inside the wheel, sha256; the config JSONs the
        run read), the functions run from each, and what was stood in for."""
        used = sorted({str(pathlib.Path(p).resolve().relative_to(self.target.resolve()))
                       for p in self.logger.config_files})
        rec = provenance([UTILS_PATH] + used, self.target)
        rec["functions"] = {KERNEL_PATH: list(FUSED_MOE_FUNCTIONS), UTILS_PATH: list(UTILS_FUNCTIONS)}
        cap = self.platform.capability
        rec["stand_ins"] = ("envs: VLLM_BATCH_INVARIANT False, VLLM_TUNED_CONFIG_FOLDER and VLLM_TRITON_USE_TD "
                            f"unset; current_platform: CUDA, compute capability {cap[0]}.{cap[1]}; device name "
                            "NVIDIA_H200; moe_align_block_size: jitguard.kernels.moe.moe_align_block_size")
        return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wheel", help=f"the vllm {VERSION} wheel (default: bench/corpus/wheels/, else pip download)")
    args = ap.parse_args()
    if args.wheel:
        wheel = pathlib.Path(args.wheel)
    else:
        wheel = find_wheel()
        if wheel is None:
            sys.path.insert(0, str(BENCH))
            from fetch_vllm import download_wheel

            wheel = download_wheel(BENCH / "corpus" / "wheels")
    src = extract(wheel)
    print(f"extracted {len(src['files'])} files of {src['wheel']} (sha256 {src['wheel_sha256'][:12]}...) into {TARGET}")


if __name__ == "__main__":
    main()
