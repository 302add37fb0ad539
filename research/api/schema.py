"""Pydantic result models in the OpenAPI schema, in the OpenAPI 3.0 form the rest of the schema uses.

A pydantic model given to ``extend_schema`` (``responses=Model``) is described from the model's own JSON
schema in serialization mode, the shape ``to_json`` writes. drf-spectacular's bundled pydantic extension
passes that JSON Schema (2020-12) through as it is; this one, registered over it (higher priority), rewrites
what OpenAPI 3.0 cannot say and keeps the schema's conventions:

- a union with null is the other type marked ``nullable: true``; a reference may have no siblings in
  3.0, so a nullable or described reference is wrapped in ``allOf``;
- ``const`` is a one-value ``enum``; a nullable ``enum`` lists null among its values;
- a component is named by the model's title: its class name unless its config sets a title (two models
  sharing a title keep the names pydantic gives them);
- the titles pydantic derives from field names are left out, as drf-spectacular writes none.

Imported by ``research.api.views``, which serves the schema: every schema is built from the URL
configuration, which imports that module, so the extension is registered before any schema is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.drainage import set_override
from drf_spectacular.plumbing import ResolvedComponent
from pydantic import BaseModel
from pydantic.json_schema import model_json_schema

REF = "#/components/schemas/"
NULL: dict[str, Any] = {"type": "null"}
SCHEMA_MAPS = ("properties", "patternProperties")
SCHEMA_LISTS = ("anyOf", "allOf", "oneOf")
SCHEMA_ONE = ("items", "additionalProperties", "not")

Schema = dict[str, Any]


def component_name(model: type[BaseModel]) -> str:
    """The component a model is in the schema: its title, by default its class name."""
    title = model.model_config.get("title")
    return title or model.__name__


def openapi_schema(model: type[BaseModel]) -> tuple[Schema, dict[str, Schema]]:
    """The model's schema and the components it refers to (name -> schema), in OpenAPI 3.0 form."""
    schema = model_json_schema(model, ref_template=REF + "{model}", mode="serialization")
    definitions: dict[str, Schema] = schema.pop("$defs", {})
    names = {key: str(definition.get("title", key)) for key, definition in definitions.items()}
    if len(set(names.values())) < len(names):
        names = {key: key for key in definitions}
    components = {names[key]: to_openapi(definition, names) for key, definition in definitions.items()}
    return to_openapi(schema, names), components


def to_openapi(node: Schema, names: Mapping[str, str]) -> Schema:
    """One JSON Schema node (and the nodes inside it) in OpenAPI 3.0 form; ``names`` renames components."""
    out: Schema = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "$ref":
            name = value.removeprefix(REF)
            out[key] = REF + names.get(name, name)
        elif key in SCHEMA_MAPS:
            out[key] = {name: to_openapi(sub, names) for name, sub in value.items()}
        elif key in SCHEMA_LISTS:
            out[key] = [to_openapi(sub, names) for sub in value]
        elif key in SCHEMA_ONE and isinstance(value, dict):
            out[key] = to_openapi(value, names)
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    variants = out.get("anyOf", [])
    if NULL in variants:
        rest = [v for v in variants if v != NULL]
        del out["anyOf"]
        out = {**rest[0], **out} if len(rest) == 1 else {"anyOf": rest, **out}
        out["nullable"] = True
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    if "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


class PydanticResultExtension(PydanticExtension):
    """drf-spectacular's pydantic extension with the schema in OpenAPI 3.0 form (see the module docstring)."""

    priority = 1  # over the bundled extension, which matches the same classes

    def get_name(self, auto_schema: Any, direction: str) -> str:
        # Components inside a model are registered by name alone (there is no class to compare), as the
        # bundled extension does; a name shared with another component is then not reported as a collision.
        set_override(self.target, "suppress_collision_warning", True)
        return component_name(self.target)

    def map_serializer(self, auto_schema: Any, direction: str) -> Schema:
        schema, components = openapi_schema(self.target)
        for name, component in components.items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(name=name, type=ResolvedComponent.SCHEMA, object=name, schema=component)
            )
        return schema


class DigestTokenScheme(KnoxTokenScheme):
    """The API's token authentication (django-rest-knox's, ``research.access.api_tokens``) in the schema,
    under the name and shape DRF's token authentication had: ``Authorization: Token <key>``."""

    target_class = "research.access.api_tokens.DigestTokenAuthentication"
    name = "tokenAuth"
