"""The MoE benchmark's vLLM peer: taken from the vLLM 0.33.0 wheel at run time, with its source recorded.

The tests that read the wheel (bench/corpus/wheels/, where bench/fetch_vllm.py downloads it) are
skipped without it; the check that no copy of vLLM is tracked runs everywhere.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from peers import vllm_wheel  # noqa: E402

WHEEL = vllm_wheel.find_wheel()
needs_wheel = pytest.mark.skipif(WHEEL is None, reason="no vllm 0.33.0 wheel in bench/corpus/wheels/")
H200_CONFIGS = ("E=128,N=768,device_name=NVIDIA_H200.json", "E=8,N=14336,device_name=NVIDIA_H200.json",
                "E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8.json")


@pytest.fixture(scope="module")
def extracted(tmp_path_factory):
    target = tmp_path_factory.mktemp("peer") / "vllm-0.33.0"
    vllm_wheel.extract(WHEEL, target)
    return target


@needs_wheel
def test_extract_records_wheel_and_every_file(extracted):
    src = json.loads((extracted / "SOURCE.json").read_text())
    assert src["wheel"] == WHEEL.name and src["version"] == "0.33.0"
    assert src["wheel_sha256"] == hashlib.sha256(WHEEL.read_bytes()).hexdigest()
    paths = {f["path_in_wheel"] for f in src["files"]}
    assert vllm_wheel.KERNEL_PATH in paths and vllm_wheel.UTILS_PATH in paths
    assert {vllm_wheel.CONFIG_DIR + n for n in H200_CONFIGS} <= paths
    for f in src["files"]:
        assert hashlib.sha256((extracted / f["path_in_wheel"]).read_bytes()).hexdigest() == f["sha256"]
    assert all(p == vllm_wheel.KERNEL_PATH or p == vllm_wheel.UTILS_PATH or p.endswith(".json") for p in paths)


@needs_wheel
def test_provenance_refuses_a_changed_file(extracted, tmp_path):
    import shutil

    copy = tmp_path / "vllm-0.33.0"
    shutil.copytree(extracted, copy)
    assert vllm_wheel.provenance(target=copy)["files"][0]["path_in_wheel"] == vllm_wheel.KERNEL_PATH
    cfg = copy / vllm_wheel.CONFIG_DIR / H200_CONFIGS[0]
    cfg.write_text(cfg.read_text().replace("16", "32", 1))
    with pytest.raises(SystemExit, match="changed since it was extracted"):
        vllm_wheel.provenance([vllm_wheel.CONFIG_DIR + H200_CONFIGS[0]], target=copy)


_RUN = r"""
import json, os, sys
sys.path[:0] = [sys.argv[1] + "/bench", sys.argv[1]]
import pathlib
import torch
from kernels import moe
from peers import vllm_launch, vllm_wheel
vllm_launch._PEER = vllm_wheel.Peer(moe.moe_align_block_size, pathlib.Path(sys.argv[2]))
out = {"vllm_modules": sorted(m for m in sys.modules if m == "vllm" or m.startswith("vllm."))}
out["kernel_type"] = type(vllm_launch.peer().fused_moe_kernel).__name__
out["kernel_file"] = vllm_launch.peer().fused_moe_kernel.fn.__code__.co_filename
out["mixtral_fp8_m1"] = vllm_launch.vllm_config(1, 8, 14336, 4096, 2, True)
out["qwen3_fp8_m1"] = vllm_launch.vllm_config(1, 128, 768, 2048, 8, True)
torch.manual_seed(0)
errs = []
for M, E, topk in ((1, 8, 2), (5, 4, 2)):  # the naive one-slot path (M*topk*4 <= E) and the aligned one
    N = K = 64
    a = torch.randn(M, K)
    w = torch.randn(E, N, K) / 8
    ids = torch.stack([torch.randperm(E)[:topk] for _ in range(M)]).to(torch.int32)
    cfg = {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 32, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 1, "num_warps": 4,
           "num_stages": 2}
    prep = vllm_launch.prepare(ids, cfg, E)
    c = torch.full((M * topk, N), float("nan"))
    vllm_launch.launch(a, w, c, None, None, *prep, top_k=topk, config=cfg)
    ref = torch.stack([a[s // topk] @ w[ids.view(-1)[s]].t() for s in range(M * topk)])
    errs.append([prep[0] is None, ((c - ref).norm() / ref.norm()).item()])
out["errors"] = errs
out["provenance"] = vllm_launch.provenance()
print(json.dumps(out))
"""


@needs_wheel
def test_peer_runs_vllms_own_code_without_importing_vllm(extracted):
    """vLLM's kernel, launch and config choice run from the extracted files (Triton's interpreter on
    the CPU): outputs match a float reference on both expert-assignment paths, no vllm module is
    imported, and the provenance names the config JSON read."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", _RUN, str(ROOT), str(extracted)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["vllm_modules"] == []
    assert out["kernel_type"] in ("JITFunction", "InterpretedFunction")
    assert out["kernel_file"] == str(extracted / vllm_wheel.KERNEL_PATH)
    (naive, e1), (aligned_naive, e2) = out["errors"]
    assert naive and not aligned_naive
    assert e1 < 1e-2 and e2 < 1e-2  # compute_type bf16: rounding of the output only
    cfg, where = out["mixtral_fp8_m1"]
    assert where == "shipped H200 JSON" and cfg["BLOCK_SIZE_M"] == 64 and cfg["GROUP_SIZE_M"] == 64
    cfg, where = out["qwen3_fp8_m1"]
    assert where == "get_default_config" and cfg["BLOCK_SIZE_M"] == 16 and cfg["BLOCK_SIZE_K"] == 128
    prov = out["provenance"]
    assert prov["wheel"] == WHEEL.name and len(prov["wheel_sha256"]) == 64
    used = [f["path_in_wheel"] for f in prov["files"]]
    assert used[0] == vllm_wheel.KERNEL_PATH
    assert vllm_wheel.CONFIG_DIR + "E=8,N=14336,device_name=NVIDIA_H200,dtype=fp8_w8a8.json" in used
    assert "fused_moe_kernel" in prov["functions"][vllm_wheel.KERNEL_PATH]


def test_repository_holds_no_copy_of_vllm():
    """The peer's files live only in the git-ignored extraction folder: nothing tracked carries vLLM's
    copyright header, bench/peers/ holds no config JSON, and (once extracted) no tracked peer file
    contains the kernel's text."""
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True).stdout.decode()
    files = [p for p in listing.split("\0") if p]
    if not files:
        pytest.skip("not a git checkout")
    # the header vLLM's files carry, assembled so that this file does not carry it
    header = " ".join(["SPDX-File" + "Copy" + "rightText:", "Copy" + "right", "contributors", "to", "the", "vLLM", "project"])
    assert not [p for p in files if p.endswith(".py") and header in (ROOT / p).read_text(errors="replace")]
    tracked = [p for p in files if p.startswith("bench/peers/")]
    assert not [p for p in tracked if "vllm-0.33.0" in p or p.endswith(".json")]
    kernel = (pathlib.Path(vllm_wheel.TARGET) / vllm_wheel.KERNEL_PATH)
    if kernel.is_file():
        body = kernel.read_text()
        start = body.index("def fused_moe_kernel(")
        snippet = body[start:start + 400]
        for p in tracked:
            assert snippet not in (ROOT / p).read_text(), p
