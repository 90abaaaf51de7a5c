#!/usr/bin/env python3
"""validate-json.py SCHEMA_DIR SCHEMA_NAME FILE...: validates JSON documents against docs/schema (draft 2020-12)."""
import json
import os
import sys

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

directory, name, files = sys.argv[1], sys.argv[2], sys.argv[3:]
resources = []
for entry in os.listdir(directory):
    if entry.endswith(".schema.json"):
        with open(os.path.join(directory, entry)) as handle:
            resources.append((entry, Resource.from_contents(json.load(handle))))
registry = Registry().with_resources(resources)
with open(os.path.join(directory, name)) as handle:
    schema = json.load(handle)
Draft202012Validator.check_schema(schema)
validator = Draft202012Validator(schema, registry=registry)
failed = 0
for path in files:
    with open(path) as handle:
        document = json.load(handle)
    for error in validator.iter_errors(document):
        failed += 1
        print(f"{path}: {error.json_path}: {error.message}")
print(f"{len(files) - failed if failed < len(files) else 0} valid, {failed} errors")
sys.exit(1 if failed else 0)
