"""Evaluation and harm probes as pure functions, for the perplexity, sample, harm and report stages.

Nothing here imports the model: probes take plain callables (a batch of texts in, a list of
continuations / log-probabilities / scores out) and token-id sequences, so they are testable on
toy inputs and reusable with any language model.

- `ngram`: unigram and bigram baselines with add-k smoothing (F4), and all three baselines fitted.
- `kneser_ney`: the interpolated Kneser-Ney trigram baseline.
- `position_scorer`: what the n-gram baselines share (the positions scored, sparse code counts).
- `perplexity_math`: perplexity and bits per byte from summed negative log-likelihoods (F1).
- `minimal_pairs`: share of grammatical/ungrammatical pairs where the model prefers the first (F5).
- `scaling`: Kaplan et al. 2020 scaling-law predictions, non-embedding parameter count (B8-B10).
- `diversity`: distinct-n and repetition of sampled text (E7).
- `toxicity`: toxicity scorer interface, expected maximum toxicity, toxicity probability (G2).
- `bias`: continuation toxicity and conditional log-prob gaps across demographic groups (G3, G4).
- `memorisation`: canaries and their exposure, verbatim extraction of training text (G6).
- `pii_leakage`: share of samples that reproduce PII strings seen in training (G6).
- `prompt_sets`: loaders for the prompt sets shipped in `conf/eval/`.
"""
