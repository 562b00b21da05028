"""Integrations with other tools: the vLLM general plugin (integrations/vllm.py)."""
