"""Other frameworks' models on ascend_ops, each imported explicitly:

    import ascend_ops.integrations.transformers   # Hugging Face Transformers causal LMs and VLMs
    import ascend_ops.integrations.megatron       # megatron-core's GPTModel

The code lives in the training room (ascend_ops.training.integrations); this package keeps
the public import path.
"""
