"""Validates files against JSON Schemas with the `jsonschema` package (draft 2020-12), an
independent check of the schemas `assay schema KIND` prints. Used by tests/it/schema.rs.

stdin: {"checks": [{"schema": {...}, "file": "path", "format": "json|yaml|toml|jsonl"}]}
stdout: {"results": [{"file": "path", "errors": ["message", ...]}]} in the same order.
"""

import json
import sys
import tomllib

import jsonschema
import yaml


def documents(path, fmt):
    with open(path, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8-sig")
    if fmt == "json":
        return [json.loads(text)]
    if fmt == "yaml":
        return [yaml.safe_load(text)]
    if fmt == "toml":
        return [tomllib.loads(text)]
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    raise ValueError(f"unknown format {fmt}")


def main():
    request = json.load(sys.stdin)
    results = []
    for check in request["checks"]:
        schema = check["schema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        errors = []
        try:
            for doc in documents(check["file"], check["format"]):
                for e in validator.iter_errors(doc):
                    where = "/".join(str(p) for p in e.absolute_path)
                    errors.append(f"{where or '(root)'}: {e.message}")
        except Exception as e:  # a file that does not parse is an error of the check
            errors.append(f"cannot read: {e}")
        results.append({"file": check["file"], "errors": errors})
    json.dump({"results": results}, sys.stdout)


if __name__ == "__main__":
    main()
