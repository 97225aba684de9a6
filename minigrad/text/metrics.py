"""BLEU and chrF over a corpus, through sacrebleu (the standard implementation, so the
scores are comparable with published ones): ``pip install sacrebleu``."""


def _sacrebleu():
    try:
        import sacrebleu
    except ImportError:
        raise ImportError("BLEU and chrF need sacrebleu: pip install sacrebleu (or "
                          "pip install -e '.[demos]')") from None
    return sacrebleu


def _check(hypotheses, references):
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: "
                         "expected one reference per hypothesis")


def bleu(hypotheses, references):
    """Corpus BLEU (0 to 100) of the hypotheses against one reference each, with
    sacrebleu's defaults (13a tokenisation, exponential smoothing)."""
    _check(hypotheses, references)
    return _sacrebleu().corpus_bleu(list(hypotheses), [list(references)]).score


def chrf(hypotheses, references):
    """Corpus chrF (0 to 100): character n-gram F-score, sacrebleu's defaults (n = 6,
    beta = 2)."""
    _check(hypotheses, references)
    return _sacrebleu().corpus_chrf(list(hypotheses), [list(references)]).score
