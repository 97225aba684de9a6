"""An encoder-only, bidirectional transformer with BERT's masked-language-model head
(Devlin et al., 2019), and the 80/10/10 masking it is trained with.

    idx -> token + position embeddings -> LayerNorm -> encoder (every position sees every
    other) -> Linear -> GELU -> LayerNorm -> decoder tied to the token embedding -> logits
"""
import numpy as np

import minigrad as mg
from minigrad import nn
import minigrad.nn.functional as F


class BERT(nn.Module):
    """A masked language model: at every position, logits of the token that belongs there.

    Args:
        vocab_size: the number of token ids, special tokens included.
        d_model, nhead, num_layers, dim_feedforward, dropout: the encoder's sizes (GELU
            feed-forward, post-LN as BERT unless norm_first).
        max_len: the most positions the learned position table holds.
        pad_id: the padding token: its embedding is zero and, by default, it is masked as a
            key (None: no padding token).
        mask_id: the [MASK] token that ``mask_tokens`` puts in place of hidden tokens.
        norm_first: pre-LN layers and a final LayerNorm instead of BERT's post-LN.
    Shape:
        idx (B, T) integer -> logits (B, T, vocab_size)
    """

    def __init__(self, vocab_size, d_model=128, nhead=4, num_layers=4, dim_feedforward=512,
                 dropout=0.0, max_len=256, pad_id=0, mask_id=1, norm_first=False):
        super().__init__()
        self.vocab_size, self.pad_id, self.mask_id = vocab_size, pad_id, mask_id
        self.tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.pos_emb = nn.LearnedPositionalEmbedding(max_len, d_model)
        self.emb_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
                                           activation="gelu", norm_first=norm_first,
                                           layer_norm_eps=1e-12)
        final_norm = nn.LayerNorm(d_model) if norm_first else None
        self.encoder = nn.TransformerEncoder(layer, num_layers, norm=final_norm)
        # the MLM head: transform, then the decoder that shares the token embedding
        self.head_dense = nn.Linear(d_model, d_model)
        self.head_act = nn.GELU()
        self.head_norm = nn.LayerNorm(d_model, eps=1e-12)
        self.decoder = nn.Linear(d_model, vocab_size)
        self.decoder.weight = self.tok_emb.weight
        nn.init.zeros_(self.decoder.bias)
        # BERT's N(0, 0.02) for the embeddings
        for table in (self.tok_emb, self.pos_emb):
            nn.init.normal_(table.weight, std=0.02)
        if pad_id is not None:
            with mg.no_grad():
                self.tok_emb.weight[pad_id] = 0.0

    def forward(self, idx, key_padding_mask=None):
        """Logits at every position.

        Args:
            key_padding_mask: (B, T) bool, True at positions no token may attend to; by
                default the positions holding pad_id.
        """
        if key_padding_mask is None and self.pad_id is not None:
            key_padding_mask = idx == self.pad_id                            # (B, T)
        x = self.pos_emb(self.tok_emb(idx))                                  # (B, T, E)
        x = self.dropout(self.emb_norm(x))
        x = self.encoder(x, src_key_padding_mask=key_padding_mask)           # (B, T, E)
        x = self.head_norm(self.head_act(self.head_dense(x)))                # (B, T, E)
        return self.decoder(x)                                               # (B, T, V)

    def loss(self, inputs, labels, key_padding_mask=None):
        """The mean cross-entropy over the predicted positions (labels != -100), in nats."""
        logits = self(inputs, key_padding_mask)                              # (B, T, V)
        return F.cross_entropy(logits.reshape(-1, self.vocab_size), labels.reshape(-1))


def mask_tokens(idx, mask_id, vocab_size, special_ids=(), p=0.15):
    """BERT's corruption for masked-language-model training: each token that is not special
    is chosen with probability p; a chosen token becomes mask_id with probability 0.8, a
    random token with probability 0.1 (drawn uniformly from the ids that are not special),
    and stays itself with probability 0.1. The model must predict every chosen token.

    Draws come from minigrad's generator, so ``mg.manual_seed`` fixes them.

    Args:
        idx: (B, T) integer tensor of token ids.
        mask_id: the [MASK] token.
        vocab_size: the number of token ids.
        special_ids: ids never chosen nor drawn as random tokens (padding, [MASK], ...).
        p: the probability of choosing a token (default 0.15).
    Shape:
        idx (B, T) -> (inputs (B, T), labels (B, T)), both int64 on idx's device; labels are
        the original ids where chosen and -100 (cross_entropy's ignore_index) elsewhere.
    """
    rng = mg.backend.generator()
    ids = idx.numpy()
    special = np.isin(ids, list(special_ids))
    chosen = (rng.random(ids.shape) < p) & ~special
    r = rng.random(ids.shape)  # decides mask / random / keep for the chosen
    ordinary = np.setdiff1d(np.arange(vocab_size), list(special_ids))
    random_ids = ordinary[rng.integers(0, len(ordinary), size=ids.shape)]
    inputs = np.where(chosen & (r < 0.8), mask_id, ids)
    inputs = np.where(chosen & (r >= 0.8) & (r < 0.9), random_ids, inputs)
    labels = np.where(chosen, ids, -100)
    return (mg.tensor(inputs, dtype=mg.int64, device=idx.device),
            mg.tensor(labels, dtype=mg.int64, device=idx.device))
