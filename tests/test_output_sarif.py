"""SARIF 2.1.0 output, checked against the parts of the OASIS schema it uses.

No SARIF schema ships in a Python package this project installs, so the constraints
are written out here by hand from the specification: for every object amplint emits,
its required properties, the properties it may have (the schema forbids any other:
``additionalProperties: false``), and the value rules (1-based regions, enums)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from amplint.diagnostics import Applicability, Diagnostic, Edit, Fix, Location
from amplint.output import Sourced
from amplint.output.sarif import format_sarif, sarif_document
from amplint.rules import all_rules

# object name -> (required, allowed, {property: object name of its value, or a check})
Check = Callable[[Any], bool]
SCHEMA: dict[str, tuple[set[str], set[str], dict[str, str | Check]]] = {
    "sarifLog": (
        {"version", "runs"},
        {"$schema", "version", "runs", "inlineExternalProperties", "properties"},
        {"version": lambda v: v == "2.1.0", "runs": "run[]"},
    ),
    "run": (
        {"tool"},
        {
            "tool", "invocations", "conversion", "language", "versionControlProvenance",
            "originalUriBaseIds", "artifacts", "logicalLocations", "graphs", "results",
            "automationDetails", "runAggregates", "baselineGuid", "redactionTokens",
            "defaultEncoding", "defaultSourceLanguage", "newlineSequences", "columnKind",
            "externalPropertyFileReferences", "threadFlowLocations", "taxonomies",
            "addresses", "translations", "policies", "webRequests", "webResponses",
            "specialLocations", "properties",
        },
        {
            "tool": "tool",
            "invocations": "invocation[]",
            "results": "result[]",
            "originalUriBaseIds": "artifactLocation{}",
            "columnKind": lambda v: v in {"utf16CodeUnits", "unicodeCodePoints"},
        },
    ),
    "tool": ({"driver"}, {"driver", "extensions", "properties"}, {"driver": "toolComponent"}),
    "toolComponent": (
        {"name"},
        {
            "guid", "name", "organization", "product", "productSuite", "shortDescription",
            "fullDescription", "fullName", "version", "semanticVersion", "dottedQuadFileVersion",
            "releaseDateUtc", "downloadUri", "informationUri", "globalMessageStrings",
            "notifications", "rules", "taxa", "locations", "language", "contents",
            "isComprehensive", "localizedDataSemanticVersion", "minimumRequiredLocalizedDataSemanticVersion",
            "associatedComponent", "translationMetadata", "supportedTaxonomies", "properties",
        },
        {"rules": "reportingDescriptor[]", "name": lambda v: isinstance(v, str)},
    ),
    "reportingDescriptor": (
        {"id"},
        {
            "id", "deprecatedIds", "guid", "deprecatedGuids", "name", "deprecatedNames",
            "shortDescription", "fullDescription", "messageStrings", "defaultConfiguration",
            "helpUri", "help", "relationships", "properties",
        },
        {
            "shortDescription": "multiformatMessageString",
            "fullDescription": "multiformatMessageString",
            "help": "multiformatMessageString",
            "defaultConfiguration": "reportingConfiguration",
            "properties": "propertyBag",
        },
    ),
    "reportingConfiguration": (
        set(),
        {"enabled", "level", "rank", "parameters", "properties"},
        {
            "enabled": lambda v: isinstance(v, bool),
            "level": lambda v: v in {"none", "note", "warning", "error"},
        },
    ),
    "multiformatMessageString": (
        {"text"},
        {"text", "markdown", "properties"},
        {"text": lambda v: isinstance(v, str) and bool(v)},
    ),
    "message": ({"text"}, {"text", "markdown", "id", "arguments", "properties"}, {}),
    "invocation": (
        {"executionSuccessful"},
        {"executionSuccessful", "commandLine", "arguments", "exitCode", "properties"},
        {"executionSuccessful": lambda v: isinstance(v, bool)},
    ),
    "result": (
        {"message"},
        {
            "ruleId", "ruleIndex", "rule", "kind", "level", "message", "analysisTarget",
            "locations", "guid", "correlationGuid", "occurrenceCount", "partialFingerprints",
            "fingerprints", "stacks", "codeFlows", "graphs", "graphTraversals",
            "relatedLocations", "suppressions", "baselineState", "rank", "attachments",
            "hostedViewerUri", "workItemUris", "provenance", "fixes", "taxa",
            "webRequest", "webResponse", "properties",
        },
        {
            "message": "message",
            "locations": "location[]",
            "fixes": "fix[]",
            "level": lambda v: v in {"none", "note", "warning", "error"},
            "ruleIndex": lambda v: isinstance(v, int) and v >= -1,
        },
    ),
    "location": (
        set(),
        {"id", "physicalLocation", "logicalLocations", "message", "annotations", "relationships", "properties"},
        {"physicalLocation": "physicalLocation"},
    ),
    "physicalLocation": (
        {"artifactLocation"},  # (or "address", which amplint never uses)
        {"address", "artifactLocation", "region", "contextRegion", "properties"},
        {"artifactLocation": "artifactLocation", "region": "region"},
    ),
    "artifactLocation": (
        set(),
        {"uri", "uriBaseId", "index", "description", "properties"},
        {"uri": lambda v: isinstance(v, str) and " " not in v and bool(v)},
    ),
    "region": (
        set(),
        {
            "startLine", "startColumn", "endLine", "endColumn", "charOffset", "charLength",
            "byteOffset", "byteLength", "snippet", "message", "sourceLanguage", "properties",
        },
        {
            key: (lambda v: isinstance(v, int) and v >= 1)
            for key in ("startLine", "startColumn", "endLine", "endColumn")
        },
    ),
    "fix": (
        {"artifactChanges"},
        {"description", "artifactChanges", "properties"},
        {"description": "message", "artifactChanges": "artifactChange[]", "properties": "propertyBag"},
    ),
    "artifactChange": (
        {"artifactLocation", "replacements"},
        {"artifactLocation", "replacements", "properties"},
        {"artifactLocation": "artifactLocation", "replacements": "replacement[]"},
    ),
    "replacement": (
        {"deletedRegion"},
        {"deletedRegion", "insertedContent", "properties"},
        {"deletedRegion": "region", "insertedContent": "artifactContent"},
    ),
    "artifactContent": (set(), {"text", "binary", "rendered", "properties"}, {}),
    "propertyBag": (set(), set(), {}),  # any properties
}  # fmt: skip


def validate(value: Any, kind: str, where: str = "$") -> None:
    if kind.endswith("[]"):
        assert isinstance(value, list), where
        for index, item in enumerate(value):
            validate(item, kind[:-2], f"{where}[{index}]")
        return
    if kind.endswith("{}"):
        assert isinstance(value, dict), where
        for key, item in value.items():
            validate(item, kind[:-2], f"{where}.{key}")
        return
    required, allowed, rules = SCHEMA[kind]
    assert isinstance(value, dict), f"{where} is not an object"
    assert required <= set(value), f"{where} lacks {required - set(value)}"
    if kind != "propertyBag":
        assert set(value) <= allowed, f"{where} ({kind}) has {set(value) - allowed}"
    for key, rule in rules.items():
        if key not in value:
            continue
        if isinstance(rule, str):
            validate(value[key], rule, f"{where}.{key}")
        else:
            assert rule(value[key]), f"{where}.{key} = {value[key]!r}"


def diagnostic(path: str, fix: Fix | None = None, code: str = "AMP001") -> Diagnostic:
    return Diagnostic(code, "deprecated", path, Location(2, 10), Location(2, 37), fix)


SAFE_FIX = Fix(
    "Replace",
    (
        Edit(20, 47, 'torch.amp.GradScaler("cuda")', Location(2, 10), Location(2, 37)),
        Edit(0, 0, "import torch\n", Location(1, 1), Location(1, 1)),
    ),
)


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.delenv("AMPLINT_DOCS_URL", raising=False)


def test_document_follows_the_schema(tmp_path: Path) -> None:
    unsafe = Fix("Move it", SAFE_FIX.edits[:1], Applicability.UNSAFE)
    items = [
        Sourced(diagnostic("pkg/a.py", SAFE_FIX), ""),
        Sourced(diagnostic("pkg/my file.py", unsafe, code="AMP102"), ""),
        Sourced(diagnostic(str(tmp_path.parent / "outside.py")), ""),
    ]
    document = json.loads(format_sarif(items))
    validate(document, "sarifLog")
    validate(json.loads(format_sarif([])), "sarifLog")


def test_rules_results_and_fixes(tmp_path: Path) -> None:
    items = [
        Sourced(diagnostic("pkg/a.py", SAFE_FIX), ""),
        Sourced(diagnostic("pkg/my file.py", code="AMP102"), ""),
        Sourced(diagnostic(str(tmp_path.parent / "outside.py")), ""),
    ]
    run = sarif_document(items)["runs"][0]  # type: ignore[index]
    driver = run["tool"]["driver"]
    assert driver["name"] == "amplint"
    assert [rule["id"] for rule in driver["rules"]] == [rule.code for rule in all_rules()]
    amp001 = driver["rules"][0]
    assert amp001["name"] == "deprecated-amp-namespace"
    # Without AMPLINT_DOCS_URL there is no absolute URI to give (see test_docs_url).
    assert "helpUri" not in amp001 and "informationUri" not in driver
    assert amp001["help"]["markdown"].startswith("# deprecated-amp-namespace (AMP001)")
    assert amp001["fullDescription"]["text"].startswith("Flags every use of the `torch.cuda.amp`")
    assert run["columnKind"] == "unicodeCodePoints"
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": tmp_path.as_uri() + "/"}}

    first, second, third = run["results"]
    assert driver["rules"][first["ruleIndex"]]["id"] == "AMP001"
    assert driver["rules"][second["ruleIndex"]]["id"] == "AMP102"
    assert first["level"] == "error"
    assert first["message"] == {"text": "deprecated"}
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/a.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 2, "startColumn": 10, "endLine": 2, "endColumn": 37}
    (fix,) = first["fixes"]
    assert fix["description"] == {"text": "Replace"}
    assert fix["properties"] == {"applicability": "safe"}
    (change,) = fix["artifactChanges"]
    assert change["artifactLocation"] == {"uri": "pkg/a.py", "uriBaseId": "%SRCROOT%"}
    # Edits in file order, each a deleted region and the text that replaces it.
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 1, "startColumn": 1, "endLine": 1, "endColumn": 1},
            "insertedContent": {"text": "import torch\n"},
        },
        {
            "deletedRegion": {"startLine": 2, "startColumn": 10, "endLine": 2, "endColumn": 37},
            "insertedContent": {"text": 'torch.amp.GradScaler("cuda")'},
        },
    ]
    assert "fixes" not in second
    uri = second["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "pkg/my%20file.py" and unquote(uri) == "pkg/my file.py"
    assert third["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": (tmp_path.parent / "outside.py").as_uri()
    }
    assert run["invocations"] == [{"executionSuccessful": True}]


def test_uris_are_relative_to_the_github_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path))
    run = sarif_document([Sourced(diagnostic("train.py"), "")])["runs"][0]  # type: ignore[index]
    artifact = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": "sub/train.py", "uriBaseId": "%SRCROOT%"}
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.as_uri() + "/"


def test_an_internal_error_marks_the_run_unsuccessful() -> None:
    document = sarif_document([], successful=False)
    assert document["runs"][0]["invocations"] == [{"executionSuccessful": False}]  # type: ignore[index]


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d["runs"][0]["results"][0].update(column=3),  # not a SARIF property
        lambda d: d["runs"][0]["results"][0].pop("message"),
        lambda d: d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"].update(
            startColumn=0
        ),
        lambda d: d["runs"][0]["results"][0].update(level="fatal"),
        lambda d: d["runs"][0]["tool"]["driver"].pop("name"),
    ],
)
def test_the_checker_catches_broken_documents(damage: Callable[[Any], None]) -> None:
    document = json.loads(format_sarif([Sourced(diagnostic("a.py", SAFE_FIX), "")]))
    damage(document)
    with pytest.raises(AssertionError):
        validate(document, "sarifLog")
