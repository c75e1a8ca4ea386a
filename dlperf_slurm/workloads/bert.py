"""BERT pre-training model (MLM + NSP) in plain PyTorch, laid out like HF ``BertForPreTraining``.

The MLM decoder is tied to the word embeddings; BERT-base has 110,106,428 parameters. As NVIDIA's
DeepLearningExamples does (``dense_sequence_output``), the MLM head runs only on the masked positions
(``max_predictions_per_seq``, 20 at seq 128), not on every token.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_layers: int = 12
    num_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1
    layer_norm_eps: float = 1e-12
    init_std: float = 0.02

    def as_dict(self) -> dict:
        return asdict(self)


BERT_BASE = BertConfig()
#: ``--tiny``: 2 layers, hidden 128, 2 heads, small vocabulary (for CPU smoke runs only).
BERT_TINY = BertConfig(vocab_size=2048, hidden_size=128, num_layers=2, num_heads=2, intermediate_size=512,
                       max_position_embeddings=64)


class BertEmbeddings(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
        x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertLayer(nn.Module):
    """Post-LN transformer encoder layer: self-attention (SDPA) then GELU feed-forward."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        h = cfg.hidden_size
        self.num_heads = cfg.num_heads
        self.dropout_p = cfg.dropout
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(h, cfg.intermediate_size)
        self.output = nn.Linear(cfg.intermediate_size, h)
        self.out_norm = nn.LayerNorm(h, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    @staticmethod
    def matmul_flops(inputs: tuple, output: torch.Tensor) -> int:
        """FLOPs of the two attention matmuls (scores Q.K^T and context P.V), for ``flops.forward_flops``."""
        b, s, h = inputs[0].shape
        return 2 * 2 * b * s * s * h

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        return x.view(b, s, self.num_heads, h // self.num_heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, attn_mask: torch.Tensor | None) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        ctx = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=self.dropout_p if self.training else 0.0
        )
        ctx = ctx.transpose(1, 2).reshape(b, s, h)
        x = self.attn_norm(x + self.dropout(self.attn_out(ctx)))
        y = self.output(F.gelu(self.intermediate(x)))
        return self.out_norm(x + self.dropout(y))


class BertForPreTraining(nn.Module):
    """Encoder + pooler + MLM head (transform, LayerNorm, tied decoder) + NSP head."""

    def __init__(self, cfg: BertConfig = BERT_BASE, init_weights: bool = True) -> None:
        super().__init__()
        self.config = cfg
        h = cfg.hidden_size
        self.embeddings = BertEmbeddings(cfg)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_layers))
        self.pooler = nn.Linear(h, h)
        self.mlm_transform = nn.Linear(h, h)
        self.mlm_norm = nn.LayerNorm(h, eps=cfg.layer_norm_eps)
        self.mlm_decoder = nn.Linear(h, cfg.vocab_size, bias=False)
        self.mlm_bias = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.nsp = nn.Linear(h, 2)
        if init_weights:
            self.apply(self._init_module)
        self.mlm_decoder.weight = self.embeddings.word_embeddings.weight  # tied

    def _init_module(self, m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.config.init_std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor,
        masked_positions: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (MLM logits at ``masked_positions`` [B, P, V], NSP logits [B, 2])."""
        mask = None
        if attention_mask is not None:  # [B, S] of 1/0 -> boolean [B, 1, 1, S], True = attend
            mask = attention_mask.bool()[:, None, None, :]
        x = self.embeddings(input_ids, token_type_ids)
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        idx = masked_positions.unsqueeze(-1).expand(-1, -1, x.shape[-1])
        m = self.mlm_norm(F.gelu(self.mlm_transform(torch.gather(x, 1, idx))))
        mlm_logits = self.mlm_decoder(m) + self.mlm_bias
        return mlm_logits, self.nsp(pooled)


def pretraining_loss(
    mlm_logits: torch.Tensor, nsp_logits: torch.Tensor, mlm_labels: torch.Tensor, nsp_labels: torch.Tensor
) -> torch.Tensor:
    """MLM cross-entropy over the masked positions plus NSP cross-entropy (computed in fp32)."""
    mlm = F.cross_entropy(mlm_logits.float().flatten(0, 1), mlm_labels.flatten())
    return mlm + F.cross_entropy(nsp_logits.float(), nsp_labels)
