"""The ``transformers`` reader's speed on a GPU: seconds an answer, prefill and decode apart, tokens
a second (issue 53; targets: decode 50 tokens/s or more, a 5-tile 128-token answer in 4 s or less).

    python benchmarks/reader_speed.py --index DIR --data ../shared/data/irpapers \\
        --model Qwen/Qwen2.5-VL-3B-Instruct [--questions 10] [-k 5] [--max-tokens 128] \\
        [--static-cache] [--inputs images] [--device cuda]

The first ``--questions`` questions of the dataset are searched in the index (``k`` tiles each)
and answered with ``max_tokens`` new tokens at most; the first answer warms the model (and, with
``--static-cache``, compiles the decoding step) and is left out. Each answer's ``timings`` and
``usage`` give its stages (preprocess, prefill, decode) and its decoding speed. Prints one JSON
object: the medians, the device, the attention implementation and the versions.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from pagesight import Index
from pagesight.answer.vlm import TransformersReader
from pagesight.eval.dataset import Dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--inputs", default="images")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--static-cache", action="store_true")
    args = parser.parse_args()
    import torch
    import transformers

    index = Index.open(args.index)
    reader = TransformersReader(
        model=args.model,
        device=args.device,
        max_tokens=args.max_tokens,
        inputs=args.inputs,
        static_cache=args.static_cache,
    )
    questions = list(Dataset.load(args.data).queries.values())[: args.questions + 1]
    rows = []
    for question in questions:
        answer = index.ask(question, reader, k=args.k)
        usage = answer.usage
        rows.append(
            {
                "read": answer.timings["read"],
                **{key: answer.timings[key] for key in ("preprocess", "prefill", "decode")},
                "image_tokens": usage.get("image_tokens", 0),
                "prompt_tokens": usage["prompt_tokens"],
                "completion_tokens": usage["completion_tokens"],
                "decode_tokens_per_s": usage.get("decode_tokens_per_s", 0.0),
            }
        )
    measured = rows[1:]  # the first warms up
    result = {
        "model": args.model,
        "device": str(reader.model.device),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "attention": reader.model.config._attn_implementation,
        "static_cache": args.static_cache,
        "inputs": args.inputs,
        "k": args.k,
        "answers": len(measured),
        "median": {key: round(statistics.median(row[key] for row in measured), 3) for key in measured[0]},
        "warm_up_read_s": round(rows[0]["read"], 2),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
