"""Deduplication across a corpus with no central state (the `clean` stage's second phase).

Inside the stage a document is a node: its read unit and its row among the unit's survivors
(`node = unit << 32 | row`). Each filter task writes its unit's index (`index.py`): the ids, the
exact hashes and every LSH band's keys, each sorted with their rows, and the MinHash signatures.
Then, as Ray tasks over ranges of the 64-bit key space:

1. `exact.py`: documents with equal hashes; the smallest id is kept;
2. `near.py`: per band and key range, the documents sharing a key (exact removals left out): the
   smallest id anchors each group and each other member is a candidate, kept as an edge when the
   signatures agree on at least `threshold` of their values;
3. `resolve.py`: connected components over the edges only, the smallest id of each kept, and one
   remove list per unit;
4. `paragraph.py`: per range of the unit-hash space, the lines or paragraphs of the documents
   still kept that `min_docs` of them hold (`paragraph_index.py` lists each document's unit
   hashes); every holder but the smallest id loses the unit.

These are the decisions of the in-memory algorithm (`filters/minhash.py`,
`filters/dedup_exact.py`) on the same input: the same candidate pairs, the same edges, the same
component roots. Memory: a task holds one key range of one band (or of the hashes); only the
components step holds anything corpus-wide, and that is proportional to the duplicate pairs.
"""
