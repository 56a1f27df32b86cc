"""The NPU path: whether the adapter can run (`adapter`), torch_npu's op names over ours
(`compat`), CANN's built-in shape limits (`limits`) and the first-run acceptance check on
hardware (`acceptance`)."""
