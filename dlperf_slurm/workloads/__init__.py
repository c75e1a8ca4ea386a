"""Built-in reference workloads (suite ``pytorch-ddp``): ResNet-50 v1.5 and BERT-base in plain PyTorch.

Run with ``python -m dlperf_slurm.workloads.train``. Importing this package imports no torch.
"""
