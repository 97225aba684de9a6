"""An image captioner: a patch-embedding vision encoder (as ViT, Dosovitskiy et al., 2021)
under a transformer decoder, with greedy decoding over a key/value cache and the decoder's
cross-attention over the patches for every generated word.

    images -> p x p patches -> Linear -> + 2-D positions -> encoder -> memory (one per patch)
    tokens -> embed * sqrt(d) + positions -> decoder(memory) -> generator -> logits
"""
import math

import numpy as np

import minigrad as mg
from minigrad import nn
from minigrad.models import decoding
from minigrad.models.inspect import collect_attention


def patchify(images, patch_size):
    """Cut images into non-overlapping square patches, row by row, each flattened in
    (channel, row, column) order: a Linear over them is Conv2d(C, E, p, stride=p).

    Shape:
        images (B, C, H, W) -> (B, H/p * W/p, C * p * p)
    """
    B, C, H, W = images.shape
    p = patch_size
    x = images.reshape(B, C, H // p, p, W // p, p)
    x = x.permute(0, 2, 4, 1, 3, 5)                                          # (B, h, w, C, p, p)
    return x.reshape(B, (H // p) * (W // p), C * p * p)


def sinusoidal_2d(grid, d_model):
    """The 2-D sinusoidal table of a grid x grid of patches: the first half of the channels
    are the 1-D table of nn.SinusoidalPositionalEncoding(d_model / 2) at the patch's row,
    the second half the same at its column (as MAE's 2-D sin-cos embedding).

    Shape:
        -> ndarray (grid * grid, d_model), patches row by row
    """
    table = nn.SinusoidalPositionalEncoding(d_model // 2, grid).pe.numpy()  # (grid, d/2)
    rows = np.repeat(table, grid, axis=0)                                    # patch // grid
    cols = np.tile(table, (grid, 1))                                         # patch % grid
    return np.concatenate([rows, cols], axis=1)


class Captioner(nn.Module):
    """Captions images: a transformer encoder over patch embeddings with 2-D positions, and
    a transformer decoder over the words that cross-attends to the patches.

    Args:
        vocab_size: the number of token ids (pad_id, bos_id and eos_id among them).
        image_size, patch_size, in_channels: square images of image_size pixels (divisible
            by patch_size) with in_channels channels; (image_size / patch_size) ** 2 patches.
        d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
            norm_first: as nn.TransformerEncoderLayer (pre-LN stacks end with a LayerNorm).
        max_len: the longest token sequence (BOS included) the decoder's table holds.
        pad_id, bos_id, eos_id: the padding (zero embedding, masked as a key), start and
            end tokens.
    Shape:
        images (B, C, H, W) float, tokens (B, T) integer -> logits (B, T, vocab_size)
    """

    def __init__(self, vocab_size, image_size=32, patch_size=4, in_channels=3, d_model=64,
                 nhead=4, num_encoder_layers=2, num_decoder_layers=2, dim_feedforward=256,
                 dropout=0.0, norm_first=True, max_len=16, pad_id=0, bos_id=1, eos_id=2):
        super().__init__()
        if image_size % patch_size != 0:
            raise ValueError(f"image_size ({image_size}) must be divisible by patch_size "
                             f"({patch_size})")
        self.d_model, self.patch_size = d_model, patch_size
        self.pad_id, self.bos_id, self.eos_id = pad_id, bos_id, eos_id
        self.grid = image_size // patch_size
        self.patch_embed = nn.Linear(in_channels * patch_size ** 2, d_model)
        self.register_buffer("patch_pos", mg.tensor(sinusoidal_2d(self.grid, d_model),
                                                    dtype=mg.get_default_dtype()),
                             persistent=False)
        self.tok_embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.tok_pos = nn.SinusoidalPositionalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(dropout)
        kw = dict(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                  dropout=dropout, norm_first=norm_first)
        final = nn.LayerNorm(d_model) if norm_first else None
        self.encoder = nn.TransformerEncoder(lambda: nn.TransformerEncoderLayer(**kw),
                                             num_encoder_layers, final)
        final = nn.LayerNorm(d_model) if norm_first else None
        self.decoder = nn.TransformerDecoder(lambda: nn.TransformerDecoderLayer(**kw),
                                             num_decoder_layers, final)
        self.generator = nn.Linear(d_model, vocab_size)
        # N(0, 1/d) scaled by sqrt(d), as models.Transformer: the scale of the position table
        nn.init.normal_(self.tok_embed.weight, std=d_model ** -0.5)
        with mg.no_grad():
            self.tok_embed.weight[pad_id] = 0.0

    def forward(self, images, tokens):
        return self.decode(tokens, self.encode(images))

    def encode(self, images):
        """One feature vector per patch, patches row by row.

        Shape:
            images (B, C, H, W) -> memory (B, S, E), S = (H / patch_size) ** 2
        """
        x = self.patch_embed(patchify(images, self.patch_size))              # (B, S, E)
        x = self.dropout(x + self.patch_pos.to(x.dtype))
        return self.encoder(x)                                               # (B, S, E)

    def decode(self, tgt, memory, memory_key_padding_mask=None, cache=None):
        """Next-token logits at every position of ``tgt``, attending causally to it and to
        every patch (the signature of models.Transformer.decode, which the decoding loops of
        models.decoding run on).

        Args:
            cache: an nn.DecoderCache: tgt then holds only the positions after
                ``cache.position``.
        Shape:
            tgt (B, T) integer, memory (B, S, E) -> logits (B, T, vocab_size)
        """
        start = 0 if cache is None else cache.position
        tgt_key_padding_mask = tgt == self.pad_id                            # (B, T)
        if cache is not None:  # the keys are every position so far
            tgt_key_padding_mask = cache.extend_padding(tgt_key_padding_mask)
        x = self.tok_embed(tgt) * math.sqrt(self.d_model)                    # (B, T, E)
        x = self.dropout(self.tok_pos(x, offset=start))
        x = self.decoder(x, memory, tgt_key_padding_mask=tgt_key_padding_mask,
                         memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=True, cache=cache)                    # (B, T, E)
        return self.generator(x)                                             # (B, T, V)

    def greedy_search(self, memory, memory_key_padding_mask, max_new_tokens, bos_id, eos_id):
        """The most likely next token at each step, until every row has produced EOS
        (models.decoding.greedy_search, as models.Transformer's).

        Shape:
            memory (B, S, E) -> ndarray (B, L) int64, padded with pad_id after EOS
        """
        return decoding.greedy_search(self, memory, memory_key_padding_mask, max_new_tokens,
                                      bos_id, eos_id)

    def generate(self, images, max_new_tokens):
        """Greedy captions, from BOS, one token at a time over a key/value cache (see
        ``greedy_search``); pad and BOS are never produced. Runs without gradients and in
        eval mode (see nn.utils.evaluating).

        Shape:
            images (B, C, H, W) -> LongTensor (B, L) of generated ids without BOS,
            L <= max_new_tokens, each row padded with pad_id after its EOS.
        """
        with nn.utils.evaluating(self):
            memory = self.encode(images)
            out = self.greedy_search(memory, None, max_new_tokens, self.bos_id, self.eos_id)
        return mg.tensor(out, dtype=mg.int64, device=images.device)

    def caption_with_attention(self, images, max_new_tokens, layer=-1):
        """Greedy captions and, for each generated token, the decoder's cross-attention
        over the patches when it was predicted, averaged over the heads.

        The weights come from one teacher-forced pass over BOS and the generated tokens
        (models.inspect.collect_attention): the decoder is causal, so the query that
        predicted token t sees what it saw during generation, and its weights are those.

        Args:
            layer: the decoder layer whose cross-attention is returned (default the last),
                or None for the mean over layers.
        Shape:
            images (B, C, H, W) -> tokens LongTensor (B, L) as ``generate``, and weights
            ndarray (B, L, S) on the host, each row summing to 1 over the S patches (row
            by row of the grid; reshape to (grid, grid) to draw).
        """
        tokens = self.generate(images, max_new_tokens)                       # (B, L)
        bos = mg.full((tokens.shape[0], 1), self.bos_id, dtype=mg.int64, device=images.device)
        tgt = mg.cat([bos, tokens[:, :-1]], dim=1)                           # (B, L)
        cross = np.stack(collect_attention(self, images, tgt)["cross"])      # (N, B, H, L, S)
        cross = cross.mean(2)                                                # (N, B, L, S)
        return tokens, (cross.mean(0) if layer is None else cross[layer])
