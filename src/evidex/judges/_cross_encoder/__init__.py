"""``local:cross-encoder``: the user's own cross-encoder, exported to ONNX, for tier and rerank.

``path=DIR`` names a directory that holds a Hugging Face cross-encoder (such as
cross-encoder/ms-marco-MiniLM-L-6-v2) exported to ONNX beside its ``tokenizer.json``::

    optimum-cli export onnx --model cross-encoder/ms-marco-MiniLM-L-6-v2 DIR

and, for an int8 graph, ``optimum-cli onnxruntime quantize --onnx_model DIR --avx2 -o INT8``
(it writes ``model_quantized.onnx``; ``INT8`` needs the ``tokenizer.json`` beside it).

The graph (``model.onnx``, else ``model_quantized.onnx``, or ``model_file=``; fp32 or int8)
runs on the onnxruntime path of ``local:minilm`` (:mod:`evidex.judges._onnx`: one thread per
run, runs side by side, length-sorted batches) and is never downloaded: a missing or malformed
file is a :class:`~evidex.errors.ConfigError` when the judge is built.

Each passage is read together with the query as one pair, ``[CLS] query [SEP] passage [SEP]``
by the tokenizer's own template, with token type ids when the graph takes them. The graph's
output is the relevance logit (``[batch, 1]``) or two class logits (``[batch, 2]``, read as
``logit[1] - logit[0]``). The score is the logit's sigmoid, in [0, 1]: it orders a rerank (the
pointwise score step answers with it too) and is compared with the tier cut points
(``thresholds=0.9,0.5,0.1`` by default, not fitted; ``evidex calibrate tier`` fits them on a
golden set and prints the option to pass). A tier reply quotes the passage's best-matching
sentence, each sentence scored as a pair with the query as well, and its justification gives
the numbers. The identity (model version, fingerprint, hence the cache key) carries the sha256
of the graph and of the tokenizer, hashed once per process per file size and mtime.

Modules: ``_model`` (files, checks, the pair runs) and ``_judge`` (the judge and its options).
"""

from evidex.judges._cross_encoder._judge import (
    DEFAULT_CUT_POINTS,
    CrossEncoderJudge,
    CrossEncoderOptions,
)

__all__ = ["DEFAULT_CUT_POINTS", "CrossEncoderJudge", "CrossEncoderOptions"]
