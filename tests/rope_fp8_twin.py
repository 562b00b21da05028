"""The uncorrected twin's kernel is generated from the corrected one.

fixtures/rope_fp8_uncorrected.py keeps its own docstring, imports and wrapper, written by hand; its
``_inv_rope_fp8_quant_kernel`` (decorator to the last line of the function) is the corrected
kernel's from kernels/rope_fp8.py with exactly the substitutions below: the plain ``@triton.jit``
and the two parameter comments that say what that changes.

    python tests/rope_fp8_twin.py           # exit 1 if the twin's kernel is out of step
    python tests/rope_fp8_twin.py --write   # regenerate it from the corrected kernel
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORRECTED = ROOT / "kernels" / "rope_fp8.py"
TWIN = ROOT / "fixtures" / "rope_fp8_uncorrected.py"
KERNEL = "_inv_rope_fp8_quant_kernel"
SUBSTITUTIONS = (
    ('@triton.jit(do_not_specialize=["num_tokens", "scale_stride"])\n', "@triton.jit\n"),
    ("    num_tokens,  # T: varies with every batch\n",
     "    num_tokens,  # T: varies with every batch, and is specialized here\n"),
    ("    scale_stride,  # T4 = ceil(T / 4) * 4: varies with every batch\n",
     "    scale_stride,  # T4 = ceil(T / 4) * 4: varies with every batch, and is specialized here\n"),
)


def kernel_span(source: str) -> tuple[int, int]:
    """(first, last) 0-based line indices of KERNEL's decorator and last line."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == KERNEL:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
            return first, node.end_lineno - 1
    raise ValueError(f"no top-level {KERNEL}")


def twin_kernel(corrected: str) -> str:
    """The corrected kernel's lines with SUBSTITUTIONS applied (each must occur exactly once)."""
    first, last = kernel_span(corrected)
    text = "".join(corrected.splitlines(keepends=True)[first:last + 1])
    for old, new in SUBSTITUTIONS:
        if text.count(old) != 1:
            raise ValueError(f"the corrected kernel has {text.count(old)} copies of {old.strip()!r}: update "
                             "SUBSTITUTIONS in tests/rope_fp8_twin.py")
        text = text.replace(old, new)
    return text


def generated_twin(twin: str, corrected: str) -> str:
    """``twin`` with its kernel replaced by the one generated from ``corrected``."""
    lines = twin.splitlines(keepends=True)
    first, last = kernel_span(twin)
    return "".join(lines[:first]) + twin_kernel(corrected) + "".join(lines[last + 1:])


def main(argv: list[str]) -> int:
    twin = TWIN.read_text(encoding="utf-8")
    want = generated_twin(twin, CORRECTED.read_text(encoding="utf-8"))
    if "--write" in argv:
        if want != twin:
            TWIN.write_text(want, encoding="utf-8")
            print(f"rewrote the kernel of {TWIN.relative_to(ROOT)}")
        return 0
    if want != twin:
        print(f"{TWIN.relative_to(ROOT)}: its kernel is out of step with {CORRECTED.relative_to(ROOT)}; "
              "run python tests/rope_fp8_twin.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
