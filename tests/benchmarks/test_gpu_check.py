"""``python -m benchmarks.gpu_check`` without a GPU: a clear message and exit status 2, not a traceback."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without a GPU")
def test_gpu_check_fails_clearly_without_cuda(capsys) -> None:
    from benchmarks import gpu_check

    assert gpu_check.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
