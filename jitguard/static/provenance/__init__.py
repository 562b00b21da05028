"""Provenance of launch arguments: does a value change with every call (VARYING), take a few values
(BUCKETED), stay fixed for a model (STABLE), or is there nothing to go on (UNKNOWN)?

The classifier follows values through local assignments, tuple unpacking of shapes, tensors allocated
in the function (so a stride of a buffer laid out with a varying dimension is varying), closures, and
into the wrapper functions of the same module that call the launcher. Names are used as evidence only
when the structure says nothing (an entry point's parameter, an attribute of an unknown object), or to
tell a varying dimension from a model dimension in ``B, T, H, K = q.shape``. docs/provenance.md
documents every rule.

The package: ``value`` (Prov, the verdict on one value, and ``join``), ``syntax`` (small readers of
``ast`` nodes), ``conventions`` (names and calls that are evidence), ``bindings`` (what the walk of a
module records: functions, parameters, how each local gets its value), ``tensors`` (dims and strides
of tensor expressions), ``guards`` (what the guards before a launch say of its arguments), ``memo``
(the Classifier's memo tables and per-node walks), ``rules`` (the registry of inference rules and the
confidence levels), ``classify`` (the Classifier that follows a value to where it comes from).
"""
from jitguard.static.provenance.bindings import Entry, FunctionInfo, ModuleInfo, ParamInfo
from jitguard.static.provenance.classify import Classifier
from jitguard.static.provenance.conventions import annotation_vtype, name_class, strong_stable, weight_like
from jitguard.static.provenance.syntax import int_literal
from jitguard.static.provenance.value import Prov, join

__all__ = ["Classifier", "Entry", "FunctionInfo", "ModuleInfo", "ParamInfo", "Prov", "annotation_vtype",
           "int_literal", "join", "name_class", "strong_stable", "weight_like"]
