"""CUDA graphs for decode-only steps: captured once per batch size, replayed with the step's inputs copied into
static buffers (padding rows write no slot and read no context)."""

from __future__ import annotations

import logging

import torch

from inference.core.config import EngineConfig
from inference.worker.attention import AttentionBackend, AttentionMetadata
from inference.worker.models.llama import LlamaForCausalLM
from inference.worker.step_inputs import StepInputs

logger = logging.getLogger(__name__)


def cuda_graph_batch_sizes(max_num_seqs: int) -> list[int]:
    """Decode batch sizes captured in CUDA graphs: powers of two below max_num_seqs, and max_num_seqs."""
    sizes = [1 << i for i in range(max_num_seqs.bit_length()) if (1 << i) < max_num_seqs]
    return sizes + [max_num_seqs]


class CudaGraphs:
    def __init__(
        self,
        model: LlamaForCausalLM,
        backend: AttentionBackend,
        config: EngineConfig,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.model, self.backend, self.config = model, backend, config
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        max_bs = config.max_num_seqs
        self.vars = {
            "input_ids": torch.zeros(max_bs, dtype=torch.int64, device=device),
            "positions": torch.zeros(max_bs, dtype=torch.int64, device=device),
            "slot_mapping": torch.full((max_bs,), -1, dtype=torch.int64, device=device),
            "context_lens": torch.zeros(max_bs, dtype=torch.int32, device=device),
            "block_tables": torch.zeros(max_bs, config.max_blocks_per_seq, dtype=torch.int32, device=device),
            "query_start_loc": torch.arange(max_bs + 1, dtype=torch.int32, device=device),
            "hidden": torch.zeros(max_bs, model.config.hidden_size, dtype=dtype, device=device),
        }
        self.device = device

    def can_replay(self, inputs: StepInputs) -> bool:
        return bool(self.graphs) and inputs.meta.decode_only and inputs.meta.num_seqs <= max(self.graphs)

    @torch.inference_mode()
    def capture(self) -> None:
        sizes = cuda_graph_batch_sizes(self.config.max_num_seqs)
        v = self.vars
        pool = None
        for bs in reversed(sizes):  # largest first, so smaller graphs fit in its memory pool
            meta = self._meta(bs)
            self.backend.prepare(meta, self.config.block_size)
            v["hidden"][:bs] = self.model(v["input_ids"][:bs], v["positions"][:bs], meta)  # warm-up
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool):
                v["hidden"][:bs] = self.model(v["input_ids"][:bs], v["positions"][:bs], meta)
            if pool is None:
                pool = graph.pool()
            self.graphs[bs] = graph
            torch.cuda.synchronize(self.device)
        logger.info("captured CUDA graphs for decode batch sizes %s", sizes)

    def replay(self, inputs: StepInputs) -> torch.Tensor:
        num_seqs = inputs.meta.num_seqs
        graph_bs = min(b for b in self.graphs if b >= num_seqs)
        v = self.vars
        width = inputs.meta.block_tables.shape[1]
        v["input_ids"][:num_seqs] = inputs.input_ids
        v["positions"][:num_seqs] = inputs.positions
        v["positions"][num_seqs:graph_bs] = 0
        v["slot_mapping"][:num_seqs] = inputs.meta.slot_mapping
        v["slot_mapping"][num_seqs:graph_bs] = -1  # padding rows write nothing...
        v["context_lens"][:num_seqs] = inputs.meta.context_lens
        v["context_lens"][num_seqs:graph_bs] = 0  # ...and read nothing
        v["block_tables"][:num_seqs, :width] = inputs.meta.block_tables
        self.graphs[graph_bs].replay()
        return v["hidden"][:num_seqs]

    def _meta(self, bs: int) -> AttentionMetadata:
        v = self.vars
        return AttentionMetadata(
            slot_mapping=v["slot_mapping"][:bs],
            block_tables=v["block_tables"][:bs],
            context_lens=v["context_lens"][:bs],
            query_start_loc=v["query_start_loc"][: bs + 1],
            max_query_len=1,
            max_context_len=self.config.max_model_len,
        )
