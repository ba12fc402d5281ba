"""Compare two dynamic schemes' search cost and leakage, from what the
server really sees.

FAST (forward private) and KPR12 (not forward private, verifiable) index
the same mail: the SpamAssassin corpus if `scripts/fetch-data.sh` fetched
it into data/ (300 messages), else a synthetic stand-in that says so.
For each scheme:

- cost: rounds, bytes each way and store reads of 10 searches (the meter);
- search pattern: whether the server sees a repeated search repeat;
- forward privacy: after a search for `w`, a new document holding `w` is
  added; does the update touch a store key that the search read? If it
  does, the server links the update to the earlier search.

Run: python examples/compare_schemes.py [DATA_DIR]
"""

import json
import random
import re
import sys
from pathlib import Path

import sesame


def corpus(data_dir: Path, n: int = 300):
    mail = data_dir / "spam-assassin"
    files = sorted(mail.glob("*/*.json")) if mail.is_dir() else []
    if files:
        random.Random(1).shuffle(files)
        docs = {}
        for i, f in enumerate(files[:n]):
            text = json.loads(f.read_text(errors="replace"))["text"].lower()
            words = sorted(set(re.findall(r"[a-z]{4,12}", text)))[:60]
            docs[i] = words
        return "SpamAssassin mail", docs
    rng = random.Random(1)
    vocab = [f"w{i}" for i in range(200)]
    return "synthetic stand-in (no data/spam-assassin)", {
        d: rng.sample(vocab, k=rng.randrange(5, 30)) for d in range(n)
    }


def between(view, first, last):
    """The events of requests first..last (inclusive), by position."""
    starts = [i for i, e in enumerate(view) if e["event"] == "request"]
    ends = [i for i, e in enumerate(view) if e["event"] == "response"]
    return view[starts[first] : ends[last] + 1]


def study(scheme, docs):
    ix = sesame.Index.create(scheme)
    for d, words in docs.items():
        ix.add(d, words)
    counts = {}
    for words in docs.values():
        for w in words:
            counts[w] = counts.get(w, 0) + 1
    probe = sorted(counts, key=lambda w: (-counts[w], w))[:10]
    rounds = bytes_ = reads = 0
    for w in probe:
        found = ix.search(w)
        assert found == sorted(d for d, ws in docs.items() if w in ws)
        m = ix.meter()
        rounds, bytes_ = rounds + m["rounds"], bytes_ + m["bytes_up"] + m["bytes_down"]
        reads += m["store"]["reads"]
    w = probe[0]
    ix.record_view()
    ix.search(w)
    n_search = sum(e["event"] == "request" for e in ix.take_view())
    ix.search(w)
    second = ix.take_view()
    ix.search(w)
    third = ix.take_view()
    repeats = [e["bytes"] for e in second if e["event"] == "request"] == [
        e["bytes"] for e in third if e["event"] == "request"
    ]
    read_keys = {e["key"] for e in third if e["event"] == "read"}
    ix.add(len(docs), [w])
    update = ix.take_view()
    written = {e["key"] for e in update if e["event"] in ("write", "delete")}
    linked = bool(read_keys & written)
    return {
        "rounds": rounds,
        "bytes": bytes_,
        "reads": reads,
        "search_requests": n_search,
        "repeat_seen": repeats,
        "update_linked": linked,
    }


def main():
    data_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("data")
    name, docs = corpus(data_dir)
    print(f"corpus: {name}, {len(docs)} documents")
    for scheme in ["fast", "kpr12"]:
        r = study(scheme, docs)
        print(
            f"{scheme:6} 10 searches: {r['rounds']} rounds, {r['bytes']} bytes, {r['reads']} store reads; "
            f"repeated search seen: {'yes' if r['repeat_seen'] else 'no'}; "
            f"update linked to an earlier search: {'yes' if r['update_linked'] else 'no'}"
        )


if __name__ == "__main__":
    main()
