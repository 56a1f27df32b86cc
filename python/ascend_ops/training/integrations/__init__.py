"""Integrations: ascend_ops inside other training frameworks, each in its own module,
imported explicitly (importing ascend_ops never imports the framework):

    import ascend_ops.integrations.transformers   # Hugging Face Transformers causal LMs and VLMs
    import ascend_ops.integrations.megatron       # megatron-core's GPTModel
"""
