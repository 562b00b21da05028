"""Renderers shared by scan and the runtime report: text, json, sarif, github."""
