"""The ``transformers`` reader's speed on a GPU: seconds an answer, prefill and decode apart, tokens
a second (issue 53; targets: decode 50 tokens/s or more, a 5-tile 128-token answer in 4 s or less).

    python -m benchmarks.reader_speed --index DIR --data ../shared/data/irpapers \\
        --model Qwen/Qwen2.5-VL-3B-Instruct [--questions 10] [-k 5] [--max-tokens 128] \\
        [--static-cache] [--inputs images] [--device cuda]
    python -m benchmarks.reader_speed --tiny   # a toy Qwen2.5-VL (benchmarks/gpu_models.py) on the CPU

The first ``--questions`` questions of the dataset are searched in the index (``k`` tiles each)
and answered with ``max_tokens`` new tokens at most; the first answer warms the model (and, with
``--static-cache``, compiles the decoding step) and is left out. Each answer's ``timings`` and
``usage`` give its stages (preprocess, prefill, decode) and its decoding speed: the medians, the
device, the attention implementation and the versions.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

from benchmarks import harness
from pagesight import Index
from pagesight.answer.vlm import TransformersReader
from pagesight.eval.dataset import Dataset


def measure(index: Index, reader: TransformersReader, questions: list[str], k: int) -> dict:
    import torch
    import transformers

    rows = []
    for question in questions:
        answer = index.ask(question, reader, k=k)
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
    return {
        "device": str(reader.model.device),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "attention": reader.model.config._attn_implementation,
        "answers": len(measured),
        "median": {key: round(statistics.median(row[key] for row in measured), 3) for key in measured[0]},
        "warm_up_read_s": round(rows[0]["read"], 2),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def main(argv: list[str] | None = None) -> None:
    parser = harness.parser(__doc__)
    parser.add_argument("--index", type=Path)
    parser.add_argument("--data", type=Path)
    parser.add_argument("--model")
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--inputs", default="images")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--static-cache", action="store_true")
    args = harness.start(parser, argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.tiny:
            from benchmarks import gpu_models

            data = harness.toy_dataset(Path(tmp) / "data", tables=2)
            index = harness.toy_index(Path(tmp) / "index", data)
            args.model, args.device, args.questions, args.k, args.max_tokens = (
                str(Path(tmp) / "reader"),
                "cpu",
                2,
                1,
                4,
            )
            gpu_models.build("reader", Path(args.model), tiny=True, device="cpu")
            gpu_models.register_image_only()
        elif args.index and args.data and args.model:
            data, index = Dataset.load(args.data), Index.open(args.index, create=False)
        else:
            parser.error("--index, --data and --model are needed (or --tiny)")
        reader = TransformersReader(
            model=args.model,
            device=args.device,
            max_tokens=args.max_tokens,
            inputs=args.inputs,
            static_cache=args.static_cache,
        )
        questions = list(data.queries.values())[: args.questions + 1]
        with index:
            result = measure(index, reader, questions, args.k)
    options = {key: getattr(args, key) for key in ("model", "static_cache", "inputs", "k", "max_tokens")}
    harness.finish(args, __spec__.name, {**options, **result})


if __name__ == "__main__":
    main()
