"""What talks to CANN through torch_npu: whether the adapter can run (`adapter`), torch_npu's
op names over ours (`compat`), CANN's built-in shape limits (`limits`) and documented
refusals (`documented`), and what our op package declares (`options_support`). Nothing
here imports the training API; the first-run acceptance check is ascend_ops/acceptance.py."""
