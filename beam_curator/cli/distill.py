"""``beam-curator distill``: a sentence-transformers model distilled into a static model (model2vec)."""

from __future__ import annotations

import argparse
import sys
import textwrap

from beam_curator.cli.flags import HelpFormatter, add_logging_flags


def add_distill(commands: argparse._SubParsersAction) -> None:
    distill = commands.add_parser(
        "distill", formatter_class=HelpFormatter,
        help="distil a sentence-transformers model into a static model (for --embedding-backend static)",
        description=textwrap.fill(
            "Turn a local sentence-transformers model into a static model2vec model, offline, and print its "
            "folder. Without --output it is cached by the digest of the source model's files and the settings: "
            "a second call returns the cached folder at once, a changed source model is distilled again. "
            "semdedup --embedding-backend static does the same on first use.", 80),
    )
    add_logging_flags(distill, top_level=False)
    distill.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2",
                         help="sentence-transformers model name or local folder (the default is bundled)")
    distill.add_argument("--model-cache-dir", help="extra folder to find the model in (never downloaded)")
    distill.add_argument("--output", help="folder to write the static model to (default: the cache, "
                                          "~/.cache/beam_curator/static)")
    distill.add_argument("--pca-dims", type=int, default=256, help="dimensions of the static vectors")
    distill.set_defaults(handler=run_distill, parser=distill)


def run_distill(args: argparse.Namespace, beam_args: list[str]) -> int:
    from beam_curator.models import ModelNotFoundError
    from beam_curator.models.distill import distill_static_model

    if beam_args:
        print(f"error: distill takes no Beam flags (got {' '.join(beam_args)})", file=sys.stderr)
        return 2
    try:
        folder = distill_static_model(args.model, args.output, args.pca_dims, model_cache_dir=args.model_cache_dir)
    except (ModelNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(folder)
    return 0
