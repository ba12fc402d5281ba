"""Compare two dynamic schemes' search cost, as their meters report it.

A synthetic corpus (400 documents, Zipf-like keyword frequencies) is
indexed by FAST and by Aura; the same searches then run on both, and the
meter of each search says what it cost: rounds, bytes each way, and the
server's store reads. Run: python examples/compare_schemes.py
"""

import random

import sesame

rng = random.Random(1)
words = [f"w{i}" for i in range(50)]
docs = {d: rng.sample(words, k=rng.randrange(1, 6)) for d in range(400)}

for scheme in ["fast", "aura"]:
    ix = sesame.Index.create(scheme)
    for d, ws in docs.items():
        ix.add(d, ws)
    rounds = bytes_ = reads = 0
    for w in words[:10]:
        found = ix.search(w)
        assert found == sorted(d for d, ws in docs.items() if w in ws)
        m = ix.meter()
        rounds += m["rounds"]
        bytes_ += m["bytes_up"] + m["bytes_down"]
        reads += m["store"]["reads"]
    print(f"{scheme:6} 10 searches: {rounds} rounds, {bytes_} bytes, {reads} store reads")
